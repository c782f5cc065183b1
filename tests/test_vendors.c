/*
 * test_vendors.c - the --vendors map: loading the fixture, lookups after normalisation (case,
 * spaces, scheme prefix kept as written), harmless and conflicting duplicates (the error names
 * both lines), a missing header column, an empty id, a vendor_name that is not UTF-8, ';' files,
 * NULL maps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/vendors.h"

static void test_vendors_fixture(void **state)
{
    (void)state;
    const char *fx = getenv("APBOT_FIXTURES");
    if (!fx)
        skip();
    char path[1024];
    snprintf(path, sizeof(path), "%s/invoices/vendors.csv", fx);
    struct vendor_map *vm = NULL;
    char err[512] = "";
    if (vendor_map_load(path, &vm, err, sizeof(err)))
        fail_msg("%s", err);
    assert_string_equal(vendor_map_lookup(vm, "0088:9482348239847239874"), "100001");
    assert_string_equal(vendor_map_lookup(vm, "  0088:9482348239847239874 "), "100001");
    assert_string_equal(vendor_map_lookup(vm, "EM:INFO@SELCO.NL"),
                        "100009"); /* file: em:info@... */
    assert_string_equal(vendor_map_lookup(vm, "dk12345678"), "100005");
    assert_null(vendor_map_lookup(vm, "9482348239847239874")); /* the scheme is part of the id */
    assert_null(vendor_map_lookup(vm, "nope"));
    assert_null(vendor_map_lookup(vm, NULL));
    assert_string_equal(vendor_map_lookup(vm, "57151520"), "100008");
    /* every row of the file is in the map (14; the file has no quoting) */
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    char line[512];
    size_t rows = 0;
    assert_non_null(fgets(line, sizeof(line), in)); /* the header */
    while (fgets(line, sizeof(line), in)) {
        char *source = strtok(line, ","), *vendor = strtok(NULL, ",\n");
        assert_non_null(vendor);
        assert_string_equal(vendor_map_lookup(vm, source), vendor);
        rows++;
    }
    fclose(in);
    assert_int_equal(rows, 14);
    vendor_map_free(vm);
}

static char *write_tmp(const char *text)
{
    const char *t = getenv("TMPDIR");
    char *path = malloc(256);
    assert_non_null(path);
    snprintf(path, 256, "%s/apbot-vendors-XXXXXX", t && *t ? t : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    return path;
}

static int load_text(const char *text, struct vendor_map **vm, char *err)
{
    char *p = write_tmp(text);
    err[0] = '\0';
    int rc = vendor_map_load(p, vm, err, 512);
    unlink(p);
    free(p);
    return rc;
}

static void test_vendors_duplicates_and_errors(void **state)
{
    (void)state;
    struct vendor_map *vm = NULL;
    char err[512];
    /* the same mapping twice (after normalisation) is fine; ';' and BOM; extra columns */
    assert_int_equal(load_text("\xEF\xBB\xBF*Source_ID;note;*Vendor_ID\nabc;x;100001\n"
                               " ABC ;y;100001\n\nSeller Name GmbH;z;100002\n",
                               &vm, err),
                     0);
    assert_string_equal(vendor_map_lookup(vm, "Abc"), "100001");
    assert_string_equal(vendor_map_lookup(vm, "seller   name gmbh"), "100002");
    assert_null(vendor_map_lookup(vm, "x"));
    vendor_map_free(vm);

    vm = (struct vendor_map *)0x1; /* untouched on failure */
    assert_int_equal(load_text("source_id,vendor_id\nabc,100001\nx,1\nABC,100002\n", &vm, err),
                     APBOT_E_CONFLICT);
    assert_ptr_equal(vm, (struct vendor_map *)0x1);
    assert_non_null(strstr(err, ":4: source_id 'ABC' maps to 100002 here but to 100001 on line 2"));

    assert_int_equal(load_text("source,vendor_id\nabc,1\n", &vm, err), APBOT_E_PARSE);
    assert_non_null(strstr(err, ":1: header must name the columns source_id and vendor_id"));
    assert_int_equal(load_text("source_id,vendor_id\nabc,\n", &vm, err), APBOT_E_PARSE);
    assert_non_null(strstr(err, ":2: vendor_id is empty"));
    assert_int_equal(load_text("source_id,vendor_id,vendor_name\nabc,1,Caf\xE9\n", &vm, err),
                     APBOT_E_PARSE);
    assert_non_null(strstr(err, ":2: not valid UTF-8"));
    assert_int_equal(load_text("", &vm, err), APBOT_E_PARSE);
    assert_int_equal(vendor_map_load("/nonexistent/vendors.csv", &vm, err, sizeof(err)),
                     APBOT_E_IO);

    assert_null(vendor_map_lookup(NULL, "abc"));
    vendor_map_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vendors_fixture),
        cmocka_unit_test(test_vendors_duplicates_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
