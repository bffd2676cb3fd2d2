# Included right after llama.cpp's project() call while pip builds llama-cpp-python (the Makefile's
# CMAKE_PROJECT_llama.cpp_INCLUDE): llama.cpp's "common" utility library is not built. llama-cpp-python forces it on,
# and genenv loads only libllama and ggml through llama-cpp-python's ctypes bindings; common (with its HTTP server
# library) was most of the compile.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
