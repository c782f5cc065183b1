/*
 * unittest.h - UNITTEST, for a function the product keeps to its file and the tests call
 * (curl's lib/curl_setup.h way): static in apbot_core, the library the apbot command and the
 * tools link; visible in apbot_unit, the same sources built with APBOT_UNITTEST for the tests.
 * Mark the definition `UNITTEST int x_decide(...)` and declare it in the module's private header
 * inside `#ifdef APBOT_UNITTEST`; where the file uses it above its definition, declare it there
 * too with UNITTEST. Mostly the pure decisions each module tests as a table.
 */
#ifndef APBOT_BASE_UNITTEST_H
#define APBOT_BASE_UNITTEST_H

#ifdef APBOT_UNITTEST
#define UNITTEST
#else
/* unused: a test-only probe (a function only tests call) is dropped without a warning */
#define UNITTEST static __attribute__((unused))
#endif

#endif
