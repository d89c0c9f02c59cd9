// File system helpers of the daemon: default ACLs of shared containers, and per-thread file
// system credentials for work done in another uid's files.
#define _GNU_SOURCE
#include "shims.h"

#include <errno.h>
#include <stdio.h>
#include <sys/acl.h>
#include <sys/fsuid.h>

int shim_set_group_default_acl(const char *path, unsigned int gid) {
    char text[96];
    snprintf(text, sizeof(text), "u::rwx,g::---,g:%u:rwx,m::rwx,o::---", gid);
    acl_t acl = acl_from_text(text);
    if (acl == NULL) return -errno;
    int rc = acl_set_file(path, ACL_TYPE_DEFAULT, acl) == 0 ? 0 : -errno;
    acl_free(acl);
    return rc;
}

int shim_set_thread_fs_ids(unsigned int uid, unsigned int gid) {
    // Each call returns the previous id; a second call with the same id tells whether the
    // first took effect (setfsuid reports no error itself).
    setfsgid(gid);
    setfsuid(uid);
    if ((unsigned int)setfsgid(gid) != gid || (unsigned int)setfsuid(uid) != uid) return -EPERM;
    return 0;
}
