#!/usr/bin/env bash
# Builds the Debian packages of extensiond (debian/) and puts the .deb files in dist/:
#   extensiond, libextensionruntimec0, libextensionruntimec-dev, libextensionhostc0,
#   libextensionhostc-dev, python3-extension-runtime.
#
#   scripts/package.sh [--lintian]
#
#   --lintian   then run lintian on the packages: any error fails the script; warnings are
#               printed (each one left is overridden with a reason in debian/*.lintian-overrides)
#
# Installs the build dependencies of debian/control first (apt-get build-dep, with dpkg-dev
# and, for --lintian, lintian). The Swift toolchain is not a Debian package: `swift` must be on
# PATH. The build happens in .build-package/ (a copy of the tracked files, and the Swift
# build's scratch directory, kept between runs); its log is .build-package/build.log.
set -euo pipefail
cd "$(dirname "$0")/.."

run_lintian=false
while [ $# -gt 0 ]; do
    case "$1" in
        --lintian) run_lintian=true; shift ;;
        -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "package.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

command -v swift >/dev/null 2>&1 || { echo "package.sh: swift is not on PATH (Swift 6.1 or later is required)" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
tools=(dpkg-dev)
$run_lintian && tools+=(lintian)
missing=()
for tool in "${tools[@]}"; do dpkg-query -W -f '${Status}' "$tool" 2>/dev/null | grep -q "ok installed" || missing+=("$tool"); done
# apt-get -s build-dep lists what is missing as "Inst" lines; nothing to do when there is none.
# (It fails when apt has no package lists yet: then install too, after apt-get update.)
if [ ${#missing[@]} -gt 0 ] || ! simulated=$(apt-get -s build-dep ./ 2>&1) || grep -q '^Inst ' <<<"$simulated"; then
    echo "==> installing the build dependencies"
    $sudo apt-get update -qq
    [ ${#missing[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get build-dep -y -qq ./ >/dev/null
fi

echo "==> building the packages (dpkg-buildpackage)"
# dpkg-buildpackage writes the packages into the parent of the source tree: it builds a copy
# of the tracked files in .build-package/extensiond, whose .build-deb/ (the Swift build's scratch
# directory, see debian/rules) is kept between runs.
work=.build-package
src=$work/extensiond
mkdir -p "$src"
find "$src" -mindepth 1 -maxdepth 1 ! -name .build-deb -exec rm -rf {} +
rm -f "$work"/*.deb "$work"/*.buildinfo "$work"/*.changes "$work"/build.log
git ls-files -z --cached --others --exclude-standard | xargs -0 cp -p --parents -t "$src"
(cd "$src" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1 || {
    tail -n 60 "$work/build.log" >&2
    echo "package.sh: dpkg-buildpackage failed (the last 60 lines are above; all of it in $work/build.log)" >&2
    exit 1
}
mkdir -p dist
rm -f dist/*.deb
mv "$work"/*.deb dist/
ls -l dist/*.deb

if $run_lintian; then
    echo "==> lintian"
    # --fail-on error: exit non-zero on any error tag; warnings and info are printed.
    lintian --fail-on error --no-tag-display-limit --info dist/*.deb
    echo "lintian: no error in $(ls dist/*.deb | wc -l) packages"
fi
