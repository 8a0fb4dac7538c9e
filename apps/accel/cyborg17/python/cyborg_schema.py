"""Cyborg 17's database schema as accel declares it (apps/accel/cyborg17/schema/*.sql)
against the schema Cyborg's own code makes, compared through SQLAlchemy's inspector.

    apply --url URL --file FILE
        Runs FILE's statements (`;` at a line's end ends one; `--` lines are comments) on
        the database at URL (SQLAlchemy's form) in one transaction. Prints `applied N`.

    compare --reference URL --candidate URL [--across]
        One JSON line {"missing": [...], "extra": [...]}: the facts of the reference's
        schema the candidate lacks, and the candidate's the reference lacks. A fact is a
        table, a column (type as the dialect reflects it, nullability, default,
        autoincrement), a primary key, a unique key or unique index (by columns), an
        index (by name and columns), a foreign key (columns, referred table and columns,
        `ON DELETE`), or the alembic revision the database is stamped with. With
        `--across` the two are of different dialects (SQLite and PostgreSQL): a
        `TIMESTAMP` (without time zone) is SQLite's `DATETIME`, and how an id is generated
        (SQLite's row id, PostgreSQL's identity) is not compared.
"""

import argparse
import json
import sys
import warnings

warnings.filterwarnings("ignore")

import sqlalchemy  # noqa: E402


def statements(text):
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    out, current = [], []
    for line in lines:
        current.append(line)
        if line.rstrip().endswith(";"):
            out.append("\n".join(current).rstrip().rstrip(";"))
            current = []
    if "".join(current).strip():
        out.append("\n".join(current))
    return [s for s in out if s.strip()]


def apply(args):
    engine = sqlalchemy.create_engine(args.url)
    with open(args.file) as f:
        stmts = statements(f.read())
    with engine.begin() as conn:
        for s in stmts:
            conn.exec_driver_sql(s)
    print(f"applied {len(stmts)}", flush=True)


def ondelete(fk):
    rule = (fk.get("options") or {}).get("ondelete")
    # No rule is the database's default, which is RESTRICT's behaviour on both.
    return "RESTRICT" if rule in (None, "NO ACTION") else rule.upper()


def facts(url, across=False):
    engine = sqlalchemy.create_engine(url)
    insp = sqlalchemy.inspect(engine)
    out = set()
    for t in insp.get_table_names():
        out.add(("table", t))
        for c in insp.get_columns(t):
            kind = str(c["type"])
            if across and kind == "TIMESTAMP":
                kind = "DATETIME"
            generated = bool(c.get("autoincrement") is True)
            out.add(
                (
                    "column",
                    t,
                    c["name"],
                    kind,
                    bool(c["nullable"]),
                    None if c.get("default") is None else str(c["default"]),
                    None if across else generated,
                )
            )
        pk = insp.get_pk_constraint(t)
        out.add(("primary key", t, tuple(pk.get("constrained_columns") or ())))
        for u in insp.get_unique_constraints(t):
            out.add(("unique", t, tuple(u["column_names"])))
        for i in insp.get_indexes(t):
            if i.get("unique"):
                out.add(("unique", t, tuple(i["column_names"])))
            else:
                out.add(("index", t, i["name"], tuple(i["column_names"])))
        for fk in insp.get_foreign_keys(t):
            out.add(
                (
                    "foreign key",
                    t,
                    tuple(fk["constrained_columns"]),
                    fk["referred_table"],
                    tuple(fk["referred_columns"]),
                    ondelete(fk),
                )
            )
    if "alembic_version" in insp.get_table_names():
        with engine.connect() as conn:
            for (v,) in conn.exec_driver_sql("SELECT version_num FROM alembic_version"):
                out.add(("alembic revision", v))
    return out


def compare(args):
    reference = facts(args.reference, args.across)
    candidate = facts(args.candidate, args.across)
    as_list = lambda s: sorted([list(f) for f in s], key=repr)  # noqa: E731
    print(
        json.dumps(
            {
                "missing": as_list(reference - candidate),
                "extra": as_list(candidate - reference),
                "facts": len(reference),
            }
        ),
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("apply")
    p.add_argument("--url", required=True)
    p.add_argument("--file", required=True)
    p = sub.add_parser("compare")
    p.add_argument("--reference", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--across", action="store_true")
    args = parser.parse_args()
    {"apply": apply, "compare": compare}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
