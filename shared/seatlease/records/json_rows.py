"""Many rows as one JSON parameter, on PostgreSQL: ``recordset`` and ``as_json``.

Why: a statement of many literal rows (a multi-row ``VALUES``) has a text that grows
with its rows. SQLAlchemy compiles it anew for each row count, pg8000 scans every
statement's text character by character in Python (``convert_paramstyle``) and
PostgreSQL parses it again. ``json_to_recordset`` over one JSON array parameter is a
short statement whatever the rows: compiled once and cached. (The audit insert reads its
events the same way: ``rollups``.) For the webhooks' queue it took a 4,000-row enqueue
from 1.5 s to 0.17 s; docs/benchmarks.md, "Webhooks: a burst".

    source = recordset(webhook_deliveries, ("id", "state"))
    conn.execute(update(t).where(t.c.id == source.c.id).values(state=source.c.state),
                 {"rows": as_json(rows)})
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Table, Text, bindparam, cast, column, func
from sqlalchemy.sql.selectable import TableValuedAlias

PARAMETER = "rows"


def recordset(table: Table, names: Sequence[str]) -> TableValuedAlias:
    """``json_to_recordset(:rows) AS anon(name type, ...)``: a FROM of the ``rows``
    parameter's objects, each ``name`` typed as ``table``'s column of that name."""
    columns = [column(name, table.c[name].type) for name in names]
    source = func.json_to_recordset(cast(bindparam(PARAMETER, type_=Text), JSON))
    return source.table_valued(*columns).render_derived(with_types=True)


def as_json(rows: Iterable[dict[str, Any]]) -> str:
    """The rows as the JSON array ``recordset`` reads (datetimes as ISO 8601 with their
    offsets, text as is: no ASCII escaping)."""
    return json.dumps(list(rows), separators=(",", ":"), ensure_ascii=False, default=_iso)


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON: {type(value).__name__}")
