"""The offline Spark audit of controller data directories (docs/audit.md): `rmq-audit PATH...` or
`spark-submit tools/audit/job.py PATH...`."""
