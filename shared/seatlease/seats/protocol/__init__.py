"""The seat protocol between the Python engine and the Lua seat scripts: each script's
named KEYS and ARGV (``calls``), from which the Python side builds a call's lists and
scripts.py generates the Lua prelude that binds the same names (``k.leases``,
``a.tenant_id``)."""
