/* test_config.c - CUnit tests of slotd's options: defaults, file < environment < flags, and errors
 * naming the source. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/config.h"

static int load(char **argv, int argc, char **env, struct slotd_config *c, char *err)
{
    FILE *out = fopen("/dev/null", "w");
    int rc = slotd_config_load(argc, argv, env, c, out, NULL, err, 256);
    fclose(out);
    return rc;
}

static void test_defaults(void)
{
    char *argv[] = {"slotd"};
    struct slotd_config c;
    char err[256];
    CU_ASSERT_FATAL(load(argv, 1, NULL, &c, err) == 0);
    CU_ASSERT_STRING_EQUAL(c.listen, "127.0.0.1:7700");
    CU_ASSERT_STRING_EQUAL(c.data_dir, "./slotd-data");
    CU_ASSERT(c.node_id == 1 && c.slot_groups == 8 && c.replicas == 0);
    CU_ASSERT(c.max_request_bytes == 4194304 && c.compact_entries == 10000);
    CU_ASSERT(c.propose_stream_inflight == 4096);
    CU_ASSERT_STRING_EQUAL(c.peers, "");
}

static void test_precedence(void)
{
    char path[] = "/tmp/slotd-config-test-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# comment\nlisten = 127.0.0.1:1\ndata-dir = /from/file\nslot_groups = 3\n"
               "node_id = 7\n\n");
    fclose(f);
    char cfg[80];
    snprintf(cfg, sizeof(cfg), "SLOTD_CONFIG=%s", path);
    char *env[] = {cfg, "SLOTD_DATA_DIR=/from/env", "SLOTD_NODE_ID=9", NULL};
    char *argv[] = {"slotd", "--node-id", "11", "--replicas=2"};
    struct slotd_config c;
    char err[256];
    CU_ASSERT_FATAL(load(argv, 4, env, &c, err) == 0);
    CU_ASSERT_STRING_EQUAL(c.listen, "127.0.0.1:1"); /* file only */
    CU_ASSERT_STRING_EQUAL(c.data_dir, "/from/env"); /* env over file */
    CU_ASSERT(c.slot_groups == 3);
    CU_ASSERT(c.node_id == 11); /* flag over env over file */
    CU_ASSERT(c.replicas == 2);
    /* --config on the command line wins over SLOTD_CONFIG */
    char *argv2[] = {"slotd", "--config", "/nonexistent/slotd.conf"};
    CU_ASSERT(load(argv2, 3, env, &c, err) == -1);
    CU_ASSERT(strstr(err, "/nonexistent/slotd.conf") != NULL);
    remove(path);
}

static void test_errors(void)
{
    struct slotd_config c;
    char err[256];
    char *a1[] = {"slotd", "--slot-groups", "65"};
    CU_ASSERT(load(a1, 3, NULL, &c, err) == -1);
    CU_ASSERT(strstr(err, "--slot-groups") && strstr(err, "1..64"));
    char *a2[] = {"slotd", "--nope", "1"};
    CU_ASSERT(load(a2, 3, NULL, &c, err) == -1);
    CU_ASSERT(strstr(err, "--nope") != NULL);
    char *a3[] = {"slotd", "--node-id"};
    CU_ASSERT(load(a3, 2, NULL, &c, err) == -1);
    CU_ASSERT(strstr(err, "missing value") != NULL);
    char *env[] = {"SLOTD_MAX_REQUEST_BYTES=-5", NULL};
    char *a4[] = {"slotd"};
    CU_ASSERT(load(a4, 1, env, &c, err) == -1);
    CU_ASSERT(strstr(err, "SLOTD_MAX_REQUEST_BYTES") != NULL);
    char long_listen[400];
    memset(long_listen, 'a', sizeof(long_listen) - 1);
    long_listen[sizeof(long_listen) - 1] = '\0';
    char *a5[] = {"slotd", "--listen", long_listen};
    CU_ASSERT(load(a5, 3, NULL, &c, err) == -1);
    CU_ASSERT(strstr(err, "longer than") != NULL);
    /* ProposeStream's in-flight bound: 1024 (the items of one message) .. 65536 */
    char *a8[] = {"slotd", "--propose-stream-inflight", "1023"};
    CU_ASSERT(load(a8, 3, NULL, &c, err) == -1);
    CU_ASSERT(strstr(err, "--propose-stream-inflight") && strstr(err, "1024..65536"));
    char *env8[] = {"SLOTD_PROPOSE_STREAM_INFLIGHT=65537", NULL};
    CU_ASSERT(load(a4, 1, env8, &c, err) == -1);
    CU_ASSERT(strstr(err, "SLOTD_PROPOSE_STREAM_INFLIGHT") && strstr(err, "1024..65536"));
    char *a9[] = {"slotd", "--propose-stream-inflight=65536"};
    CU_ASSERT(load(a9, 2, NULL, &c, err) == 0 && c.propose_stream_inflight == 65536);
    char *a6[] = {"slotd", "--help"};
    CU_ASSERT(load(a6, 2, NULL, &c, err) == 1);
    char *a7[] = {"slotd", "stray"};
    CU_ASSERT(load(a7, 2, NULL, &c, err) == -1);
}

/* Flags that are no option are one sentence naming them; --version answers 1; SLOTD_* variables
 * that are no option get a warning naming the nearest one, foreign ones none. */
static void test_unknown_flags_version_and_env(void)
{
    struct slotd_config c;
    char err[256];
    char *a1[] = {"slotd", "--bogus"};
    CU_ASSERT(load(a1, 2, NULL, &c, err) == -1);
    CU_ASSERT_STRING_EQUAL(err, "unknown option '--bogus' (see slotd --help)");
    char *a2[] = {"slotd", "--lisen", "127.0.0.1:1"};
    CU_ASSERT(load(a2, 3, NULL, &c, err) == -1);
    CU_ASSERT(strstr(err, "'--lisen'") != NULL);
    char *a3[] = {"slotd", "--version"};
    CU_ASSERT(load(a3, 2, NULL, &c, err) == 1);
    char *env[] = {"SLOTD_LISTN=127.0.0.1:9",
                   "SLOTD_FAULT_NET=x",
                   "SLOTD_CONFIG=",
                   "SLOTD_ZZZZZZZZZZZZZZZZ=1",
                   "SLOTD_DATA_DIR=/d",
                   "HOME=/root",
                   NULL};
    char *a4[] = {"slotd"};
    FILE *out = fopen("/dev/null", "w"), *warn = tmpfile();
    CU_ASSERT_FATAL(out != NULL && warn != NULL);
    CU_ASSERT(slotd_config_load(1, a4, env, &c, out, warn, err, sizeof(err)) == 0);
    CU_ASSERT_STRING_EQUAL(c.data_dir, "/d");
    CU_ASSERT_STRING_EQUAL(c.listen, "127.0.0.1:7700"); /* the misspelt one changed nothing */
    char text[1024] = "";
    rewind(warn);
    size_t n = fread(text, 1, sizeof(text) - 1, warn);
    text[n] = '\0';
    CU_ASSERT(strstr(text, "SLOTD_LISTN is no option; ignored\" nearest=SLOTD_LISTEN\n") != NULL);
    CU_ASSERT(strstr(text, "SLOTD_ZZZZZZZZZZZZZZZZ is no option; ignored (slotd --help") != NULL);
    CU_ASSERT(strstr(text, "FAULT") == NULL && strstr(text, "SLOTD_CONFIG") == NULL);
    CU_ASSERT(strstr(text, "DATA_DIR") == NULL);
    fclose(out);
    fclose(warn);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("config", NULL, NULL);
    CU_add_test(s, "defaults", test_defaults);
    CU_add_test(s, "file < environment < flags", test_precedence);
    CU_add_test(s, "errors name the option and source", test_errors);
    CU_add_test(s, "unknown flags, --version, unknown SLOTD_ variables",
                test_unknown_flags_version_and_env);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
