"""Reading a test database in one line: a count, a row, all rows (each read ends its transaction)."""

from __future__ import annotations


def count(conn, sql, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args or None)
        return cur.fetchone()[0]


def one_row(conn, sql, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args or None)
        row = cur.fetchone()
    conn.commit()
    return row


def all_rows(conn, sql, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args or None)
        rows = cur.fetchall()
    conn.commit()
    return rows
