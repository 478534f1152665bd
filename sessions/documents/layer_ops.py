"""TensorRT's layer type words translated into the session's `Op` vocabulary.

The words are TensorRT's own: `ParameterType` and `LayerType` of detailed layer information, the
`Layer(<Type>)` of a verbose trtexec log, and the `[Type]` of an unnamed layer's name
(`(Unnamed Layer* 108) [Shuffle]`). A Reformat converts a format; a Shuffle, Slice, Padding or Gather
moves data without converting it; a Constant computes nothing.
"""

from __future__ import annotations

from sessions.documents.trt_names import layer_type_op


def trt_op(layer_type: str | None, parameter_type: str | None) -> str | None:
    """The op of a layer whose type TensorRT states; None where neither word is one TensorRT uses for an op.

    The words and their ops, for every TensorRT version, are `sessions.documents.trt_names`' table.
    """
    return layer_type_op(layer_type, parameter_type)
