// NEON kernel set "neon-i8mm": armv8.2-a + dotprod + i8mm (smmla), compiled with -march=armv8.2-a+dotprod+i8mm.
// The code is shared by the three NEON sets (neon_impl.inc); the -march flags pick the paths.
#define OXI_NEON_TABLE kNeonI8mmKernels
#define OXI_NEON_NAME "neon-i8mm"
#include "neon_impl.inc"
