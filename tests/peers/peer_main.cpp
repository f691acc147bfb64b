// The other process of the multi-process tests. It reports on stdout, one fact per line, so the
// test can wait for facts with a deadline:
//   consume  --path P [--mode every|latest] [--reconnect] [--frames N] [--delay-us D] [--hold N]
//            [--hold-ms T] [--fork-holder] [--hold-all] [--verbose] [--timeout-ms T]
//            (--hold N: keep the first N frames until killed, or for T ms, then check them again;
//             --fork-holder: first fork a child that keeps the socket and the mappings open)
//   produce  --path P --bytes B --frames N [--wait-consumers C] [--wait-ms T]
//            [--then hold|eos|watch] [--count-logs] [--fd-headroom K [--fd-ballast N]] [--slots S]
//            [--lease-timeout-ms T] [--socket-mode 0660] [--allowed-gid G] [--interval-ms T]
//            (SIGUSR1: the ballast descriptors return; watch: a "consumers n=..." line whenever
//             what it knows of its consumers changes)
//   connect  --path P [--repeat K]
#include <cstdio>
#include <cstring>

#include "cudaipc/error.hpp"
#include "peer_args.hpp"

int main(int argc, char** argv) {
  // Lines must reach the test as they happen, not when a buffer fills.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s consume|produce|connect --path P ...\n", argv[0]);
    return 2;
  }
  peer::Args args(argc, argv, 2);
  try {
    if (!std::strcmp(argv[1], "consume")) return peer::consume(args);
    if (!std::strcmp(argv[1], "produce")) return peer::produce(args);
    if (!std::strcmp(argv[1], "connect")) return peer::try_connect(args);
  } catch (const cudaipc::Error& e) {
    std::printf("error %d %s\n", static_cast<int>(e.code()), e.what());
    return 3;
  }
  std::fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
