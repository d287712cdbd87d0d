// TFM_API marks what the library exports: the classes and functions of the public headers
// (include/tfm). The library is compiled with hidden symbol visibility (-fvisibility=hidden
// -fvisibility-inlines-hidden), so that a shared libtfm exports these and nothing of its internals;
// a static libtfm links the same way with or without it. GCC and Clang (ELF); on another compiler
// it is empty.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define TFM_API __attribute__((visibility("default")))
#else
#define TFM_API
#endif
