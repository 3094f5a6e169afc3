#!/bin/sh
# ./build.sh [--main]: compiles the Java client with javac alone (offline, incrementally:
# only when a source changed) into build/classes, the example into build/examples and,
# unless --main, the JUnit 5 tests into build/test-classes (with their resources), every
# part with -Xlint:all -Werror. Gson comes from Debian (libgoogle-gson-java:
# /usr/share/java/gson.jar) or GSON_JAR; the tests' JUnit 5 from Debian's junit5
# (/usr/share/java) or JUNIT_DIR. Prints the class path of the client (and Gson).
# Maven users: pom.xml (mvn -o package).
set -e
here="$(cd "$(dirname "$0")" && pwd)"
gson="${GSON_JAR:-/usr/share/java/gson.jar}"
junit="${JUNIT_DIR:-/usr/share/java}"
[ -f "$gson" ] || { echo "gson is missing: apt-get install libgoogle-gson-java (or set GSON_JAR)" >&2; exit 1; }
build="$here/build"
mkdir -p "$build"

# Two builds at once (./hold while make lint runs) take turns.
exec 9>"$build/.lock"
command -v flock >/dev/null && flock 9

changed() { # stamp, then the folders whose sources it covers
  stamp="$1"; shift
  [ ! -f "$stamp" ] || [ -n "$(find "$@" -type f -newer "$stamp" | head -1)" ] || [ "$here/build.sh" -nt "$stamp" ]
}

compile() { # output folder, class path, sources...
  out="$1"; cp="$2"; shift 2
  rm -rf "$out.new"
  mkdir -p "$out.new"
  javac --release 17 -Xlint:all -Werror -d "$out.new" -cp "$cp" "$@" >&2
  rm -rf "$out"
  mv "$out.new" "$out"
}

if changed "$build/.compiled-main" "$here/src/main" "$here/examples"; then
  compile "$build/classes" "$gson" $(find "$here/src/main" -name '*.java')
  compile "$build/examples" "$build/classes:$gson" "$here/examples/Hold.java"
  touch "$build/.compiled-main"
  rm -f "$build/.compiled-tests"
fi

if [ "$1" != "--main" ] && changed "$build/.compiled-tests" "$here/src/test"; then
  junit_jars="$junit/junit-jupiter-api.jar:$junit/opentest4j.jar:$junit/junit-platform-commons.jar:$junit/apiguardian-api.jar"
  [ -f "$junit/junit-jupiter-api.jar" ] || { echo "JUnit 5 is missing: apt-get install junit5 (or set JUNIT_DIR)" >&2; exit 1; }
  compile "$build/test-classes" "$build/classes:$gson:$junit_jars" $(find "$here/src/test/java" -name '*.java')
  cp -R "$here/src/test/resources/." "$build/test-classes/"
  touch "$build/.compiled-tests"
fi
echo "$build/classes:$gson"
