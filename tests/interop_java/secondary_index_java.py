"""Java Hudi 1.2 answering by a secondary key, in the Java driver's process (op ``secondary_index``
of java_hudi.py): every value it computes comes from Java code.

* ``lookups``: per value, the record keys Java's own metadata-table reader finds in the index
  (``HoodieBackedTableMetadata.readSecondaryIndexDataTableRecordKeysV2`` for a V2 index,
  ``readSecondaryIndexDataTableRecordKeysWithKeys`` for V1), no record index involved;
* ``query``: per value, the record keys of a Spark SQL filter ``column = value`` over
  ``spark.read.format("hudi")`` with the metadata table and data skipping on
  (``hoodie.enable.data.skipping``): Hudi's file index then prunes file slices with
  ``SecondaryIndexSupport`` (secondary index -> record keys -> record index -> file groups)."""

from __future__ import annotations

import os


def secondary_index_in_jvm(spark, base_path: str, partition: str, column: str, values: list) -> dict:
    jvm = spark.sparkContext._jvm
    hudi = jvm.org.apache.hudi
    jsc = spark.sparkContext._jsc
    ctx = hudi.client.common.HoodieSparkEngineContext(jsc)
    conf = hudi.hadoop.fs.HadoopFSUtils.getStorageConfWithCopy(jsc.hadoopConfiguration())
    uri = base_path if "://" in base_path else "file://" + os.path.abspath(base_path)
    meta = (hudi.common.table.HoodieTableMetaClient.builder().setConf(conf).setBasePath(uri)
            .setLoadActiveTimelineOnLoad(True).build())
    mdt_config = hudi.common.config.HoodieMetadataConfig.newBuilder().enable(True).build()
    mdt = hudi.metadata.HoodieBackedTableMetadata(ctx, meta.getStorage(), mdt_config, meta.getBasePath().toString())
    version = str(hudi.metadata.HoodieTableMetadataUtil.existingIndexVersionOrDefault(partition, meta))
    lookups: dict[str, list[str]] = {}
    for value in values:
        keys = jvm.java.util.ArrayList()
        keys.add(value)
        data = hudi.common.data.HoodieListData.eager(keys)
        if version == "V2":
            found = list(mdt.readSecondaryIndexDataTableRecordKeysV2(data, partition).collectAsList())
        else:
            pairs = mdt.readSecondaryIndexDataTableRecordKeysWithKeys(data, partition).collectAsList()
            found = [p.getValue() for p in pairs]
        lookups[value] = sorted(str(k) for k in found)
    reader = spark.read.format("hudi").options(**{
        "hoodie.metadata.enable": "true", "hoodie.enable.data.skipping": "true",
        "hoodie.metadata.index.secondary.enable": "true", "hoodie.metadata.record.index.enable": "true"})
    frame = reader.load(uri)
    query: dict[str, list[str]] = {}
    for value in values:
        rows = frame.where(frame[column] == value).select("_hoodie_record_key").collect()
        query[value] = sorted(r[0] for r in rows)
    return {"version": version, "lookups": lookups, "query": query}
