"""``python -m llama_cpp.server`` with ggml's extra weight buffers off.

ggml's CPU backend repacks weights into AMX tiles whenever the compiler saw
AMX, and a virtual machine that reports AMX without granting its state then
dies with a general protection fault on the first token. Weights stay in
plain buffers here (for a 135M model the repacking gain is negligible); every
other option is the server's own.
"""

from __future__ import annotations

import runpy

import llama_cpp.llama_cpp as bindings

_default_params = bindings.llama_model_default_params


def _model_params() -> bindings.llama_model_params:
    params = _default_params()
    params.use_extra_bufts = False
    return params


if __name__ == "__main__":
    bindings.llama_model_default_params = _model_params
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
