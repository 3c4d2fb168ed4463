// NEON kernel set "neon": armv8-a (always present on aarch64).
// The code is shared by the three NEON sets (neon_impl.inc); the -march flags pick the paths.
#define OXI_NEON_TABLE kNeonKernels
#define OXI_NEON_NAME "neon"
#include "neon_impl.inc"
