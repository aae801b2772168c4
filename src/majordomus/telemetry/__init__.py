"""The OpenTelemetry export of the record (`majordomus export --otlp`): episodes as spans, prompts as log records.

`records` builds what is sent as plain values (stdlib only, so `--dry-run` runs without the extra); `cursor` is
what was accepted, per endpoint; `otlp` is the one importer of opentelemetry, imported only inside an export.
"""
