// Blocking calls made from Python threads must let go of the GIL: what they wait for may need
// it (completions run Python callbacks such as DDP comm hooks; a Python store serves the
// rendezvous). Include Python.h before any other header, as Python asks.
#pragma once

#include <Python.h>

namespace tidegate_torch {

// Runs `body` without the GIL when this thread holds it, and takes it back afterwards, also
// when `body` throws.
template <typename Body>
void without_gil(Body&& body) {
  struct Released {
    PyThreadState* saved = nullptr;
    ~Released() {
      if (saved != nullptr) PyEval_RestoreThread(saved);
    }
  } released;
  if (Py_IsInitialized() && PyGILState_Check()) released.saved = PyEval_SaveThread();
  body();
}

}  // namespace tidegate_torch
