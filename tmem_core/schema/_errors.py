from __future__ import annotations


class DataError(ValueError):
    """Bad input data, located precisely: which file, which record, which field."""

    def __init__(self, message: str, *, file: str = "", record: str = "", field: str = "") -> None:
        self.file, self.record, self.field, self.reason = file, record, field, message
        where = ", ".join(
            part
            for part in (
                f"file {file}" if file else "",
                f"record {record}" if record else "",
                f"field {field}" if field else "",
            )
            if part
        )
        super().__init__(f"{where}: {message}" if where else message)
