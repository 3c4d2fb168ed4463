// NEON kernel set "neon-dotprod": armv8.2-a + dotprod (sdot), compiled with -march=armv8.2-a+dotprod.
// The code is shared by the three NEON sets (neon_impl.inc); the -march flags pick the paths.
#define OXI_NEON_TABLE kNeonDotprodKernels
#define OXI_NEON_NAME "neon-dotprod"
#include "neon_impl.inc"
