"""vLLM's result JSON as ``vllm bench serve --save-result`` writes it: the shape a result file
must have (tests/e2e/test_vllm_result.py, tests/integration/test_vllm_result_api.py)."""

from __future__ import annotations


def json_type(v):
    return {dict: "object", list: "array", str: "string", bool: "bool", int: "int",
            float: "float", type(None): "null"}[type(v)]


def assert_same_shape(ours: dict, vllm: dict) -> None:
    """Same keys in the same order, same JSON type per key, same element type in arrays
    (and in arrays of arrays, like itls)."""
    assert list(ours) == list(vllm)
    for key, ref in vllm.items():
        got = ours[key]
        assert json_type(got) == json_type(ref), (key, got, ref)
        if isinstance(ref, list) and ref:
            assert got, key
            for item in got:
                assert json_type(item) == json_type(ref[0]), (key, item, ref[0])
                if isinstance(ref[0], list) and ref[0]:
                    assert all(json_type(x) == json_type(ref[0][0]) for x in item), key
