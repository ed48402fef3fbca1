"""Alembic environment: migrations run against ``MARGINALIA_DATABASE_URL`` (or the URL that
``service.migrate`` passes in the config), with ``db.models`` as the target metadata."""

from alembic import context
from db.engine import database_url, make_engine
from db.models import Base

config = context.config
target_metadata = Base.metadata


def include_object(obj, name, type_, reflected, compare_to):  # noqa: ANN001, ARG001
    # Per-dataset row tables (data_<id>) and public tables' rows (public_rows_<id>) are data, created at load
    # time, not schema.
    return not (type_ == "table" and name is not None and name.startswith(("data_", "public_rows_")))


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url") or database_url()
    connectable = config.attributes.get("connection")
    if connectable is not None:
        context.configure(connection=connectable, target_metadata=target_metadata, include_object=include_object)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(url)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, include_object=include_object,
                          render_as_batch=engine.dialect.name == "sqlite")
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
