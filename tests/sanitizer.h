// Whether this test binary is built with AddressSanitizer (gcc defines
// __SANITIZE_ADDRESS__, clang has __has_feature): tests that scale with the
// work they do use it to run smaller there.
#ifndef TPUOFF_TESTS_SANITIZER_H_
#define TPUOFF_TESTS_SANITIZER_H_

namespace tpuoff::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

}  // namespace tpuoff::testing

#endif  // TPUOFF_TESTS_SANITIZER_H_
