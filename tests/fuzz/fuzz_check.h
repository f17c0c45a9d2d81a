// A property check inside a fuzz target: on failure, says which property
// broke and aborts, so libFuzzer saves the input as a crash artifact.
#pragma once

#include <cstdio>
#include <cstdlib>

#define SG_FUZZ_CHECK(cond, what)                                                                \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "fuzz property failed at %s:%d: %s (%s)\n", __FILE__, __LINE__, what, \
                   #cond);                                                                       \
      std::abort();                                                                              \
    }                                                                                            \
  } while (0)
