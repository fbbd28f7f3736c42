/*
 * jetcron-launch: sets up a run's child in the child itself, then execs the run's program (the pid stays).
 *
 *   jetcron-launch [--env-stdin] [--join PROCS]... [--private-tmp DIR] [--fsize BYTES] [--as BYTES]
 *                  [--nproc N] [--user UID:GID] -- PROGRAM [ARG]...
 *
 * In this order: with --env-stdin, read the program's environment from stdin (NAME=value items, each ended by a
 * NUL) and point stdin at /dev/null; die with the parent (PR_SET_PDEATHSIG, SIGKILL); write its pid into each
 * cgroup.procs named by --join (so the program starts inside the groups, and nothing it forks escapes them); a
 * mount namespace of its own with DIR bound over /tmp and entered (--private-tmp); the rlimits (RLIMIT_FSIZE,
 * RLIMIT_AS, RLIMIT_NPROC); the switch to the job's user, with no supplementary groups and no capabilities,
 * checked, last because the steps before it need root (a credential change clears the parent-death signal, so
 * it is set again after it); then the program, by its path, with the environment read (without --env-stdin: the
 * one it was given).
 *
 * It does what the agent's chain of tools did (setpriv, unshare, sh, env and mount, prlimit, setpriv again) in
 * one exec of a static binary. The agent starts it with an empty environment and --env-stdin, so nothing of the
 * job's environment steers it while it is root (a static binary has no dynamic loader, but its libc still reads
 * GLIBC_TUNABLES at start); the job's environment is only the program's.
 * services/jetcron_services/agent/host/launch.py builds its argv; docs/decisions-job-view.md has the measurements.
 *
 * Exit 125, with a line on stderr naming the step and the value, when a step fails (nothing of the program ran);
 * 127 when the program could not be started.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SETUP_FAILED 125
#define NOT_STARTED 127
#define MAX_JOINS 8
#define MAX_ENV_BYTES (64u << 20)
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

static void fail(const char *step, const char *value) {
    fprintf(stderr, "jetcron: could not %s %s: %s\n", step, value, strerror(errno));
    exit(SETUP_FAILED);
}

static void usage(const char *option, const char *why, const char *value) {
    fprintf(stderr, "jetcron-launch: %s %s: %s\n", option, why, value);
    exit(SETUP_FAILED);
}

/* The number in text[0..length), which is part of `value` (what an error shows). */
static unsigned long long number(const char *option, const char *text, size_t length, const char *value) {
    char digits[32];
    if (length == 0 || length >= sizeof digits)
        usage(option, "is not a whole number", value);
    memcpy(digits, text, length);
    digits[length] = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long long parsed = strtoull(digits, &end, 10);
    if (errno != 0 || *end != '\0' || digits[0] < '0' || digits[0] > '9')
        usage(option, "is not a whole number", value);
    return parsed;
}

struct ids {
    uid_t uid;
    gid_t gid;
    const char *text;
};

static void join(const char *procs) {
    char pid[32];
    int length = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        fail("join", procs);
    if (write(fd, pid, (size_t)length) != length) {
        int saved = errno;
        close(fd);
        errno = saved;
        fail("join", procs);
    }
    if (close(fd) != 0)
        fail("join", procs);
}

static void private_tmp(const char *dir) {
    if (unshare(CLONE_NEWNS) != 0)
        fail("make a mount namespace for", dir);
    /* Nothing mounted here propagates back to the host's namespace. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        fail("make the mounts private for", dir);
    if (mount(dir, "/tmp", NULL, MS_BIND, NULL) != 0)
        fail("bind over /tmp", dir);
    if (chdir("/tmp") != 0)
        fail("enter /tmp bound to", dir);
}

static void limit(int resource, const char *name, unsigned long long value) {
    struct rlimit bound = {(rlim_t)value, (rlim_t)value};
    if (setrlimit(resource, &bound) != 0)
        fail("set", name);
}

static void die_with_parent(void) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        fail("set", "the parent-death signal");
}

static struct ids parse_user(const char *text) {
    const char *colon = strchr(text, ':');
    if (colon == NULL)
        usage("--user", "is not UID:GID", text);
    struct ids ids = {(uid_t)number("--user", text, (size_t)(colon - text), text),
                      (gid_t)number("--user", colon + 1, strlen(colon + 1), text), text};
    return ids;
}

/* No capability left to the job's user: the kernel clears them on a switch from root, not on one from an agent that
 * is not root but holds CAP_SETUID (its ambient set would pass them on to the program). */
static void drop_capabilities(const char *text) {
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        fail("clear the ambient capabilities of", text);
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0)
        fail("drop the capabilities of", text);
    if (syscall(SYS_capget, &header, data) != 0)
        fail("read the capabilities of", text);
    for (int k = 0; k < 2; k++) {
        if (data[k].effective || data[k].permitted || data[k].inheritable) {
            errno = EPERM;
            fail("drop the capabilities of", text);
        }
    }
}

static void switch_user(struct ids ids) {
    if (setgroups(0, NULL) != 0)
        fail("clear the supplementary groups for", ids.text);
    if (setresgid(ids.gid, ids.gid, ids.gid) != 0)
        fail("switch to the group of", ids.text);
    if (setresuid(ids.uid, ids.uid, ids.uid) != 0)
        fail("switch to the user", ids.text);
    uid_t ruid, euid, suid;
    gid_t rgid, egid, sgid;
    if (getresuid(&ruid, &euid, &suid) != 0 || getresgid(&rgid, &egid, &sgid) != 0 || ruid != ids.uid ||
        euid != ids.uid || suid != ids.uid || rgid != ids.gid || egid != ids.gid || sgid != ids.gid ||
        getgroups(0, NULL) != 0) {
        errno = EPERM;
        fail("switch to", ids.text);
    }
    drop_capabilities(ids.text);
}

/* The environment items on stdin, read to its end (an array ending in NULL); then stdin is /dev/null. */
static char **read_environment(void) {
    size_t size = 0, room = 4096;
    char *data = malloc(room);
    if (data == NULL)
        fail("read the environment from", "stdin");
    for (;;) {
        if (size == room) {
            if (room >= MAX_ENV_BYTES) {
                errno = E2BIG;
                fail("read the environment from", "stdin");
            }
            room *= 2;
            char *grown = realloc(data, room);
            if (grown == NULL)
                fail("read the environment from", "stdin");
            data = grown;
        }
        ssize_t got = read(STDIN_FILENO, data + size, room - size);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            fail("read the environment from", "stdin");
        if (got == 0)
            break;
        size += (size_t)got;
    }
    if (size > 0 && data[size - 1] != '\0') {
        errno = EINVAL;
        fail("read the environment from", "stdin (an item not ended by a NUL)");
    }
    size_t count = 0;
    for (size_t k = 0; k < size; k++)
        count += data[k] == '\0';
    char **items = calloc(count + 1, sizeof *items);
    if (items == NULL)
        fail("read the environment from", "stdin");
    size_t at = 0;
    for (size_t k = 0; k < count; k++) {
        items[k] = data + at;
        at += strlen(data + at) + 1;
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, STDIN_FILENO) < 0)
        fail("point stdin at", "/dev/null");
    close(null);
    return items;
}

static unsigned long long option_number(const char *option, const char *text) {
    return number(option, text, strlen(text), text);
}

int main(int argc, char **argv) {
    /* Every option is read and checked before the first step: a bad one changes nothing. */
    const char *joins[MAX_JOINS];
    int joined = 0;
    const char *tmp = NULL;
    struct ids user = {0, 0, NULL};
    int fsize_set = 0, as_set = 0, nproc_set = 0, env_stdin = 0;
    unsigned long long fsize = 0, as = 0, nproc = 0;
    int i = 1;
    if (i < argc && strcmp(argv[i], "--env-stdin") == 0)
        env_stdin = 1, i++;
    for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
        const char *option = argv[i];
        if (i + 1 >= argc)
            usage(option, "needs", "a value");
        const char *value = argv[i + 1];
        if (strcmp(option, "--join") == 0) {
            if (joined == MAX_JOINS)
                usage(option, "is given more than", "8 times");
            joins[joined++] = value;
        } else if (strcmp(option, "--private-tmp") == 0) {
            if (value[0] != '/')
                usage(option, "is not an absolute path", value);
            tmp = value;
        } else if (strcmp(option, "--fsize") == 0) {
            fsize = option_number(option, value), fsize_set = 1;
        } else if (strcmp(option, "--as") == 0) {
            as = option_number(option, value), as_set = 1;
        } else if (strcmp(option, "--nproc") == 0) {
            nproc = option_number(option, value), nproc_set = 1;
        } else if (strcmp(option, "--user") == 0) {
            user = parse_user(value);
        } else {
            usage("option", "is not known", option);
        }
    }
    if (i + 1 >= argc)
        usage("--", "must be followed by", "the program");
    char **program = &argv[i + 1];
    if (program[0][0] != '/')
        usage("the program", "is not an absolute path", program[0]);

    char **environment = env_stdin ? read_environment() : environ;
    die_with_parent();
    pid_t parent = getppid();
    for (int j = 0; j < joined; j++)
        join(joins[j]);
    if (tmp != NULL)
        private_tmp(tmp);
    if (fsize_set)
        limit(RLIMIT_FSIZE, "the file size limit", fsize);
    if (as_set)
        limit(RLIMIT_AS, "the address space limit", as);
    if (nproc_set)
        limit(RLIMIT_NPROC, "the process limit", nproc);
    if (user.text != NULL) {
        switch_user(user);
        die_with_parent();
        /* A parent that died between the switch and the signal set again would never send it. */
        if (getppid() != parent) {
            fprintf(stderr, "jetcron: the process that launched %s is gone\n", program[0]);
            exit(SETUP_FAILED);
        }
    }
    execve(program[0], program, environment);
    fprintf(stderr, "jetcron: could not start %s: %s\n", program[0], strerror(errno));
    return NOT_STARTED;
}
