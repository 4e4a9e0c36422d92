// The backend's sources that include ATen, compiled as one translation unit: parsing ATen's
// headers costs about 13 s per file on a 2-core machine, so eight files took two minutes of CPU
// where this takes 20 s. Each file still compiles on its own (its includes are complete).
#include "backend.cc"
#include "backend_compressed.cc"
#include "backend_exchange.cc"
#include "backend_gather.cc"
#include "backend_reduce.cc"
#include "staging.cc"
#include "store_bridge.cc"
#include "tensor_bridge.cc"
#include "work.cc"
