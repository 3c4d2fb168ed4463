# One place for compiler flags shared by every target: oxi_set_warnings(target).
add_library(oxi_warnings INTERFACE)
if(MSVC)
  target_compile_options(oxi_warnings INTERFACE /W4)
else()
  target_compile_options(oxi_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)
  if(OXI_WERROR)
    target_compile_options(oxi_warnings INTERFACE -Werror)
  endif()
endif()

if(OXI_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

if(OXI_WASM)
  # Exceptions are how the core reports errors; 3.1.6 supports the JS-based scheme everywhere.
  add_compile_options(-fexceptions -msimd128)
  add_link_options(-fexceptions -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sTOTAL_STACK=4MB)
  # OXI_WASM_THREADS: the pthreads build (the browser module for cross-origin isolated pages);
  # every object must be built with -pthread (shared memory, atomics), so it is its own build tree.
  option(OXI_WASM_THREADS "wasm: build with pthreads (SharedArrayBuffer)" OFF)
  if(OXI_WASM_THREADS)
    add_compile_options(-pthread)
    add_link_options(-pthread)
  endif()
endif()
