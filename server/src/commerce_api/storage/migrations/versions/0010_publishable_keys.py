"""Publishable keys (issue 31): ``api_keys.role`` may be ``publishable``.

The role's CHECK constraint is replaced. PostgreSQL alters it in place. SQLite cannot alter a
constraint: batch mode copies ``api_keys`` into a new table and drops the old one, and with
foreign keys enforced (as every connection here has them, and a migration's transaction cannot
turn them off) dropping a table that ``console_sessions`` rows point at fails. So on SQLite the
sessions are held aside in a temporary table for the copy and put back after it: operators
signed in to the console stay signed in.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_ROLES_BEFORE = "role IN ('client', 'admin')"
_ROLES_AFTER = "role IN ('client', 'admin', 'publishable')"


def _replace_role_check(condition: str) -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        op.execute("CREATE TEMPORARY TABLE held_console_sessions AS SELECT * FROM console_sessions")
        op.execute("DELETE FROM console_sessions")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_constraint(op.f("ck_api_keys_role"), type_="check")
        batch.create_check_constraint(op.f("ck_api_keys_role"), condition)
    if sqlite:
        op.execute("INSERT INTO console_sessions SELECT * FROM held_console_sessions")
        op.execute("DROP TABLE held_console_sessions")


def upgrade() -> None:
    _replace_role_check(_ROLES_AFTER)


def downgrade() -> None:
    # Publishable keys cannot be kept under the old constraint: they are removed, with any
    # console session they could not have had (only admin keys sign in).
    op.execute("DELETE FROM api_keys WHERE role = 'publishable'")
    _replace_role_check(_ROLES_BEFORE)
