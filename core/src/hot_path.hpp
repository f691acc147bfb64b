#pragma once

// Functions every frame runs on a reader's path (a consumer's next and release, the C API over
// them) are placed together in .text.hot: after each wait for a frame the CPU fetches their code
// again, and spread over the library they touched 9 pages and many a half-used cache line; kept
// together, fewer of both (issue #39: the GPU machine's CPU pays for every line refilled after a
// wait, and the Python binding, which links the core in, for more of them).
#if defined(__GNUC__)
#define CUDAIPC_HOT __attribute__((hot))
#else
#define CUDAIPC_HOT
#endif
