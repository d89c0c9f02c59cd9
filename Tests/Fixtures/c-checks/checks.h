/* checks.h: the assertions of the C test programs (Tests/Fixtures/c-defaults-check,
 * c-secrets-check). Each counts itself in `checks`; the first that fails prints its file, line and
 * expression and exits 1. Include once per program. */
#ifndef EXTENSIOND_TEST_CHECKS_H
#define EXTENSIOND_TEST_CHECKS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long checks;

static void check_(int ok, const char *file, int line, const char *text) {
    __atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);
    if (ok) return;
    fprintf(stderr, "%s:%d: failed: %s\n", file, line, text);
    exit(1);
}

static void eq_(long long actual, long long expected, const char *file, int line, const char *text) {
    __atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);
    if (actual == expected) return;
    fprintf(stderr, "%s:%d: %s is %lld, expected %lld\n", file, line, text, actual, expected);
    exit(1);
}

#define CHECK(condition) check_(!!(condition), __FILE__, __LINE__, #condition)
#define EQ(actual, expected) eq_((long long)(actual), (long long)(expected), __FILE__, __LINE__, #actual)
#define STREQ(actual, expected) check_((actual) && strcmp((actual), (expected)) == 0, __FILE__, __LINE__, #actual " == " #expected)

#endif
