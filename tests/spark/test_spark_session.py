"""Spark sessions from the profiles in spark_conf/: what they set, what reaches the JVM, and a
profile that is not a mapping."""

from __future__ import annotations

import pytest

from tablesvc.errors import ConfigError
from tablesvc.spark.session import load_profile, session_conf, with_java_option

ARROW_CHECKS_OFF = ("-Darrow.enable_unsafe_memory_access=true", "-Darrow.enable_null_check_for_get=false")


def test_with_java_option_adds_keeps_and_never_overrides():
    assert with_java_option("", "-Dlog4j2.configurationFile=file:/a") == "-Dlog4j2.configurationFile=file:/a"
    assert with_java_option("-Dx=1", "-Dy=2") == "-Dx=1 -Dy=2"
    # a profile or --conf that names the property already keeps its own value
    assert with_java_option("-Dy=3 -Dx=1", "-Dy=2") == "-Dy=3 -Dx=1"


@pytest.mark.parametrize("profile", ["local", "cluster-example"])
def test_profiles_turn_off_arrow_checks_on_driver_and_executors(profile):
    conf = load_profile(profile)
    # default options: Spark puts them before extraJavaOptions, so a --conf of those adds to them
    for key in ("spark.driver.defaultJavaOptions", "spark.executor.defaultJavaOptions"):
        assert set(ARROW_CHECKS_OFF) <= set(conf[key].split()), (profile, key)


def test_a_conf_of_the_jvm_options_adds_to_the_profiles_arrow_flags_and_keeps_the_log_option():
    conf = session_conf("local", {"spark.driver.extraJavaOptions": "-Xss4m", "hoodie.cleaner.policy": "x"})
    assert set(ARROW_CHECKS_OFF) <= set(conf["spark.driver.defaultJavaOptions"].split())
    driver = conf["spark.driver.extraJavaOptions"].split()
    assert driver[0] == "-Xss4m" and driver[1].startswith("-Dlog4j2.configurationFile=file:") and len(driver) == 2
    assert "hoodie.cleaner.policy" not in conf                  # only spark.* keys reach Spark
    # a log configuration the user names is theirs
    mine = session_conf("local", {"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:/mine"})
    assert mine["spark.driver.extraJavaOptions"] == "-Dlog4j2.configurationFile=file:/mine"


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
