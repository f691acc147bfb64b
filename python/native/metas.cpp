// The meta codec's calls (cudaipc.h, "Meta areas").
#include "native.hpp"

namespace cudaipc_py {

PyMethodDef metas_functions[] = {{nullptr, nullptr, 0, nullptr}};

}  // namespace cudaipc_py
