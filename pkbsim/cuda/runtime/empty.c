/* libtorch_cuda.so stand-in: empty; it exists so that -ltorch_cuda resolves. */
