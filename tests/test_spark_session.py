"""Spark sessions from the profiles in spark_conf/: what the default profile sets in the JVM."""

from __future__ import annotations

import pytest

from tablesvc.errors import ConfigError
from tablesvc.spark.session import load_profile, with_java_option

ARROW_CHECKS_OFF = ("-Darrow.enable_unsafe_memory_access=true", "-Darrow.enable_null_check_for_get=false")


def test_with_java_option_adds_keeps_and_never_overrides():
    assert with_java_option("", "-Dlog4j2.configurationFile=file:/a") == "-Dlog4j2.configurationFile=file:/a"
    assert with_java_option("-Dx=1", "-Dy=2") == "-Dx=1 -Dy=2"
    # a profile or --conf that names the property already keeps its own value
    assert with_java_option("-Dy=3 -Dx=1", "-Dy=2") == "-Dy=3 -Dx=1"


@pytest.mark.parametrize("profile", ["local", "cluster-example"])
def test_profiles_turn_off_arrow_checks_on_driver_and_executors(profile):
    conf = load_profile(profile)
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert set(ARROW_CHECKS_OFF) <= set(conf[key].split()), (profile, key)


def test_a_profile_that_is_not_a_mapping_is_a_config_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- spark.master\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        load_profile(str(bad))


@pytest.mark.spark
def test_the_session_jvm_has_the_profile_and_log_options(spark):
    system = spark.sparkContext._jvm.java.lang.System
    assert system.getProperty("arrow.enable_unsafe_memory_access") == "true"
    assert system.getProperty("arrow.enable_null_check_for_get") == "false"
    # the log configuration is added to the profile's options, not dropped for them
    assert system.getProperty("log4j2.configurationFile", "").endswith("log4j2.properties")
