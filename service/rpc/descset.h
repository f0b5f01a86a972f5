/* descset.h - index of a serialized FileDescriptorSet: files by name, symbols to their file. */
#ifndef SLOTD_RPC_DESCSET_H
#define SLOTD_RPC_DESCSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RPC_DESCSET_FILES_MAX 64     /* FileDescriptorProtos in one set */
#define RPC_DESCSET_DEPS_MAX 32      /* dependencies of one file */
#define RPC_DESCSET_SYMBOLS_MAX 8192 /* indexed fully-qualified names in one set */
#define RPC_DESCSET_NAME_MAX 512     /* bytes of one fully-qualified name, incl. NUL */
#define RPC_DESCSET_NESTING_MAX 16   /* message nesting depth */

/* What a fully-qualified name denotes. */
enum rpc_descset_kind {
    RPC_DESCSET_MESSAGE,
    RPC_DESCSET_FIELD, /* also oneofs */
    RPC_DESCSET_ENUM,
    RPC_DESCSET_ENUM_VALUE, /* scoped like protoc: a sibling of its enum */
    RPC_DESCSET_SERVICE,
    RPC_DESCSET_METHOD,
};

struct rpc_descset_file {
    char *name;         /* "slotd/v1/metadata.proto" */
    const uint8_t *buf; /* the serialized FileDescriptorProto, inside the set's buffer */
    size_t len;
    size_t deps[RPC_DESCSET_DEPS_MAX]; /* indexes into files[] */
    size_t n_deps;
};

struct rpc_descset_symbol {
    char *name; /* "slotd.v1.Metadata.Propose", no leading dot */
    size_t file;
    enum rpc_descset_kind kind;
};

struct rpc_descset {
    struct rpc_descset_file files[RPC_DESCSET_FILES_MAX];
    size_t n_files;
    struct rpc_descset_symbol *symbols; /* sorted by name */
    size_t n_symbols;
};

/* Parses the FileDescriptorSet in buf (borrowed: must outlive *out, e.g. a const array) and
 * indexes it. Every dependency must be in the set (protoc --include_imports). On failure err
 * (NULL allowed) gets a sentence. *out: caller frees with rpc_descset_free(). Returns SLOTD_OK,
 * SLOTD_EMALFORMED (bad wire format, a missing dependency, a bound exceeded) or SLOTD_EINTERNAL. */
int rpc_descset_parse(const uint8_t *buf, size_t len, struct rpc_descset **out, char *err,
                      size_t errlen);

/* NULL is a no-op. */
void rpc_descset_free(struct rpc_descset *d);

/* The symbol named name (borrowed for the call), or NULL. The result is borrowed from d. */
const struct rpc_descset_symbol *rpc_descset_find_symbol(const struct rpc_descset *d,
                                                         const char *name);

/* The index of the file named name (borrowed for the call), or -1. */
long rpc_descset_find_file(const struct rpc_descset *d, const char *name);

/* Writes into order[] (room for RPC_DESCSET_FILES_MAX) the file `file` first, then every file it
 * depends on transitively, each once, and returns how many. */
size_t rpc_descset_closure(const struct rpc_descset *d, size_t file, size_t *order);

/* The FileDescriptorSet protoc built for this binary: every slotd .proto, health and reflection
 * (generated at build time by service/rpc/CMakeLists.txt). */
extern const uint8_t rpc_descriptor_set[];
extern const size_t rpc_descriptor_set_len;

#endif /* SLOTD_RPC_DESCSET_H */
