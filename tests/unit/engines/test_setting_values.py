"""The launch-side readers of a server tuple's settings (engines/server_base.py): the matrix schema checks the
[server] table, but an override's `server` values reach a launch unchecked, so a value of the wrong type is a
one-line UserError naming it, never a TypeError traceback; a whole float (4096.0) is the integer it spells."""

from __future__ import annotations

import pytest

from specbench.engines.server_base import as_float, as_int, as_opt_int, setting_table
from specbench.errors import UserError


def test_values_of_the_right_type_pass():
    assert as_opt_int(None) is None and as_opt_int(4096) == 4096 and as_opt_int(4096.0) == 4096
    assert as_int("3") == 3 and as_int(3.0) == 3 and as_float("2.5") == 2.5 and as_float(2) == 2.0
    assert setting_table({"env": {"A": "1"}}, "env") == {"A": "1"} and setting_table({}, "flags") == {}


@pytest.mark.parametrize("call,value", [(as_int, float("inf")), (as_opt_int, 4096.5), (as_opt_int, True), (as_opt_int, "4096"),
                                        (as_int, "three"), (as_int, None), (as_int, False), (as_float, "x"),
                                        (as_float, [1.0])])
def test_a_wrong_value_is_a_one_line_user_error(call, value):
    with pytest.raises(UserError, match="server setting") as e:
        call(value)
    assert "\n" not in str(e.value) and repr(value) in str(e.value)


def test_a_table_setting_that_is_not_a_table():
    with pytest.raises(UserError, match="'env' is not a table"):
        setting_table({"env": ["A=1"]}, "env")
