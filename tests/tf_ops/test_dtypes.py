import numpy as np
import pytest
import tensorflow as tf

from tf_ops import dtypes


@pytest.mark.parametrize("tf_dtype", sorted(dtypes.SUPPORTED_TF_DTYPES, key=lambda d: d.name))
def test_round_trip(tf_dtype):
    assert dtypes.to_tf_dtype(dtypes.to_numpy_dtype(tf_dtype)) == tf_dtype


def test_unsupported():
    with pytest.raises(TypeError, match="string cannot be passed"):
        dtypes.to_numpy_dtype(tf.string)
