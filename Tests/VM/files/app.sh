#!/bin/sh
# The app of the VM's probe (org.vmtest.app): records the URL it was opened with, the unit it
# runs in and its uid, in /tmp/vmtest-opened (written whole, then renamed).
{ echo "$1"; grep -o 'app-extensiond-[^/]*' /proc/self/cgroup | head -1; id -u; } >/tmp/vmtest-opened.$$ && mv /tmp/vmtest-opened.$$ /tmp/vmtest-opened
