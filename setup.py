from setuptools import find_packages, setup

setup(
    name="tablesvc",
    version="0.1.0",
    description="Hudi-compatible table services (compaction, log compaction, cleaning, rollback) for MOR tables, "
                "in Python on Spark",
    python_requires=">=3.11",
    packages=find_packages(include=["tablesvc", "tablesvc.*", "timeline", "timeline.*", "spark_conf"]),
    package_data={"timeline.payloads": ["schemas/*.avsc"], "tablesvc.metadata": ["schemas/*.avsc"], "spark_conf": ["*.yaml", "*.properties"]},
    # pyspark[sql] brings pandas and numpy, which PySpark's Arrow APIs (mapInArrow,
    # applyInArrow) need; PySpark does not support pandas 3 yet.
    install_requires=["pyspark[sql]>=3.5", "pandas>=2.2,<3", "pyarrow>=14", "numpy>=1.24", "fastavro>=1.9", "pyyaml>=6",
                      "obstore==0.12.1"],
    # bench: the baselines of `make bench` (tests/benchmarks); deltalake (delta-rs) for the upsert
    # case's MERGE.  Not needed by `make test`.
    # test: ruff is the linter `make test` runs first (ruff.toml), pinned so its rules stay put;
    # moto[server] is the S3 endpoint the object-store tests start on loopback (tests/s3_server.py):
    # 5.2.2 or later, whose If-None-Match/If-Match answer 412 (5.2.0-5.2.1 answer 500);
    # pytest-xdist runs `make test` in two processes (the Makefile's TEST_WORKERS).
    extras_require={"test": ["pytest>=7", "hudi==0.5.0", "ruff==0.17.6", "moto[server]==5.2.5",
                             "pytest-xdist==3.8.0"],
                    "bench": ["deltalake==1.6.6"]},
    entry_points={"console_scripts": ["tablesvc=tablesvc.cli.main:entry_point"]},
)
