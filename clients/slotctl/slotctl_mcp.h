/* slotctl_mcp.h - `slotctl mcp`: the operations MCP server over stdio and its bounds. */
#ifndef SLOTD_SLOTCTL_MCP_H
#define SLOTD_SLOTCTL_MCP_H

#include "slotctl_cli.h"

#include <jansson.h>

/* Bounds: one JSON-RPC message (a line), a tool's command output and stderr, the time a tool's
 * command may take, the --metrics URLs, one /metrics answer, its wait, and the error series
 * recent_errors returns in all. */
#define MCP_LINE_BYTES_MAX (1 << 20)
#define MCP_OUTPUT_BYTES_MAX (4 << 20)
#define MCP_STDERR_BYTES_MAX (16 << 10)
#define MCP_TOOL_TIMEOUT_MS 60000
#define MCP_METRICS_URLS_MAX 16
#define MCP_METRICS_BYTES_MAX (8 << 20)
#define MCP_METRICS_TIMEOUT_MS 5000
#define MCP_ERRORS_MAX 500

/* a: borrowed for the call (the global options every tool's command runs with: endpoints,
 * deadlines, TLS, --user/--password-file; --metrics). Answers JSON-RPC 2.0 messages, one a line
 * on stdin, one a line on stdout, until stdin ends; logs nothing on stdout besides them.
 * Returns SLOTCTL_EXIT_OK at end of input, SLOTCTL_EXIT_OTHER when it cannot start. */
int slotctl_mcp_run(const struct slotctl_args *a);

#endif /* SLOTD_SLOTCTL_MCP_H */
