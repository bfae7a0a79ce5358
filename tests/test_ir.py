"""The IR: closed-form work of small graphs, and validate() naming the node that breaks an invariant."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgeplan.errors import InvalidGraphError
from edgeplan.ir import Activation, DType, EltwiseOp, Graph, Node, OpKind, Ref, graph_to_dict
from edgeplan.ir.checks import broadcast_shapes, conv_output_size
from edgeplan.ir.ops import ActivationAttrs, ConvAttrs, EltwiseAttrs, InputAttrs, LinearAttrs, NormAttrs, SplitAttrs


def _input(shape: tuple[int, ...]) -> Node:
    return Node("x", OpKind.INPUT, InputAttrs(0), (), (), (shape,))


def _conv(name: str, src: str, cin: int, cout: int, hw: int, k: int = 3, s: int = 1, p: int = 1, g: int = 1,
          bias: bool = True) -> Node:
    out = conv_output_size(hw, k, s, 2 * p, 1)
    return Node(name, OpKind.CONV2D, ConvAttrs(cin, cout, (k, k), (s, s), (p, p, p, p), (1, 1), g, bias),
                (Ref(src),), ((1, cin, hw, hw),), ((1, cout, out, out),))


def small_graph() -> Graph:
    x = _input((1, 3, 8, 8))
    c1 = _conv("c1", "x", 3, 16, 8)
    bn = Node("bn", OpKind.BATCH_NORM, NormAttrs(16), (Ref("c1"),), ((1, 16, 8, 8),), ((1, 16, 8, 8),))
    act = Node("relu", OpKind.ACTIVATION, ActivationAttrs(Activation.RELU), (Ref("bn"),), ((1, 16, 8, 8),),
               ((1, 16, 8, 8),))
    dw = _conv("dw", "relu", 16, 16, 8, g=16, bias=False)
    add = Node("add", OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.ADD), (Ref("relu"), Ref("dw")),
               ((1, 16, 8, 8), (1, 16, 8, 8)), ((1, 16, 8, 8),))
    return Graph("small", (x, c1, bn, act, dw, add), (Ref("add"),))


def test_closed_form_work_and_sizes() -> None:
    g = small_graph().validate()
    c1, dw = g.node("c1"), g.node("dw")
    assert c1.macs == 1 * 16 * 8 * 8 * 3 * 3 * 3
    assert c1.flops == 2 * c1.macs
    assert c1.params == 16 * 3 * 9 + 16
    assert c1.param_bytes == 4 * c1.params
    assert c1.activation_bytes == 16 * 8 * 8 * 4
    assert dw.attrs.depthwise and dw.macs == 16 * 8 * 8 * 9 and dw.params == 16 * 9
    t = g.totals()
    assert t.macs == c1.macs + dw.macs
    assert t.params == c1.params + dw.params + 2 * 16  # affine batch norm: scale and shift
    assert t.compute_nodes == 2 and t.nodes == 5
    assert t.flops == 2 * t.macs + 2 * 1024 + 1024 + 1024  # bn 2/elem, relu 1/elem, add 1/elem


def test_linear_and_dtype_bytes() -> None:
    x = Node("x", OpKind.INPUT, InputAttrs(0), (), (), ((2, 10),), DType.INT8)
    fc = Node("fc", OpKind.LINEAR, LinearAttrs(10, 4), (Ref("x"),), ((2, 10),), ((2, 4),), DType.INT8)
    Graph("fc", (x, fc), (Ref("fc"),)).validate()
    assert fc.macs == 2 * 10 * 4 and fc.params == 44 and fc.param_bytes == 44 and fc.activation_bytes == 8


def test_consumers_and_json() -> None:
    g = small_graph()
    assert g.consumers["relu"] == ("dw", "add")
    d = graph_to_dict(g)
    assert [n["name"] for n in d["nodes"]] == ["x", "c1", "bn", "relu", "dw", "add"]
    assert d["totals"]["macs"] == g.totals().macs and d["nodes"][1]["attrs"]["kernel"] == [3, 3]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda ns: [*ns, ns[1]], "duplicate node name"),
        (lambda ns: [ns[0], dataclasses.replace(ns[1], inputs=(Ref("nowhere"),)), *ns[2:]], "not an earlier node"),
        (lambda ns: [ns[0], dataclasses.replace(ns[1], attrs=LinearAttrs(3, 16)), *ns[2:]], "expected ConvAttrs"),
        (lambda ns: [ns[0], dataclasses.replace(ns[1], output_shapes=((1, 16, 7, 7),)), *ns[2:]], "c1"),
        (lambda ns: [ns[0], dataclasses.replace(ns[1], input_shapes=((1, 3, 9, 8),)), *ns[2:]], "records"),
        (lambda ns: [ns[0], dataclasses.replace(ns[1], output_shapes=((1, 0, 8, 8),)), *ns[2:]], "non-positive"),
        (lambda ns: [*ns[:5], dataclasses.replace(ns[5], output_shapes=((1, 8, 8, 8),))], "broadcast"),
        (lambda ns: [*ns[:3], dataclasses.replace(ns[3], output_shapes=((1, 16, 4, 4),)), *ns[4:]],
         "keep its input shape"),
        (lambda ns: [ns[0], dataclasses.replace(ns[1], attrs=dataclasses.replace(ns[1].attrs, groups=5)), *ns[2:]],
         "groups=5"),
    ],
)
def test_validate_names_the_node(mutate: object, message: str) -> None:
    g = small_graph()
    nodes = mutate(list(g.nodes))  # type: ignore[operator]
    with pytest.raises(InvalidGraphError, match=message) as err:
        Graph("bad", tuple(nodes), g.outputs).validate()
    assert "node '" in str(err.value)


def test_validate_checks_the_pieces_of_a_split() -> None:
    x = _input((1, 3, 4))
    def split(sizes: tuple[int, ...], squeeze: bool, outs: tuple[tuple[int, ...], ...]) -> Graph:
        node = Node("s", OpKind.SPLIT, SplitAttrs(1, sizes, squeeze), (Ref("x"),), ((1, 3, 4),), outs)
        return Graph("g", (x, node), (Ref("s"),))

    split((1, 1, 1), True, ((1, 4),) * 3).validate()
    split((1, 2), False, ((1, 1, 4), (1, 2, 4))).validate()
    with pytest.raises(InvalidGraphError, match="are not the pieces"):
        split((1, 1, 1), False, ((1, 4),) * 3).validate()
    with pytest.raises(InvalidGraphError, match="squeeze needs pieces of 1"):
        split((1, 2), True, ((1, 4), (1, 4))).validate()


def test_validate_rejects_dangling_output() -> None:
    g = small_graph()
    with pytest.raises(InvalidGraphError, match="output ghost"):
        Graph("bad", g.nodes, (Ref("ghost"),)).validate()


@given(
    size=st.integers(1, 64), kernel=st.integers(1, 7), stride=st.integers(1, 4), pad=st.integers(0, 3),
    dilation=st.integers(1, 3), cin_g=st.integers(1, 4), cout_g=st.integers(1, 4), groups=st.integers(1, 4),
)
def test_conv_output_size_matches_torch_formula(size: int, kernel: int, stride: int, pad: int, dilation: int,
                                               cin_g: int, cout_g: int, groups: int) -> None:
    out = conv_output_size(size, kernel, stride, 2 * pad, dilation)
    expect = (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    assert out == expect
    if out <= 0:
        return
    cin, cout = cin_g * groups, cout_g * groups
    node = Node("c", OpKind.CONV2D, ConvAttrs(cin, cout, (kernel, kernel), (stride, stride), (pad,) * 4,
                                             (dilation, dilation), groups),
                (Ref("x"),), ((1, cin, size, size),), ((1, cout, out, out),))
    Graph("g", (_input((1, cin, size, size)), node), (Ref("c"),)).validate()
    assert node.macs == cout * out * out * cin_g * kernel * kernel


def test_broadcast() -> None:
    assert broadcast_shapes((1, 8, 4, 4), (1, 8, 1, 1)) == (1, 8, 4, 4)
    assert broadcast_shapes((8,), (2, 1)) == (2, 8)
    assert broadcast_shapes((3,), (4,)) is None


def test_ir_loads_without_torch() -> None:
    import subprocess
    import sys

    code = "import sys, edgeplan.ir, edgeplan.frontends.zoo; print('torch' in sys.modules, 'onnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
