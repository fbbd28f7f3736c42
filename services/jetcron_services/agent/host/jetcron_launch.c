/*
 * jetcron-launch: sets up a run's child in the child itself, then execs the run's program (the pid stays).
 *
 *   jetcron-launch [--env-stdin | --spare] [--join PROCS]... [--private-tmp DIR] [--fsize BYTES] [--as BYTES]
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
 * A spare (--spare, no --user and no program: services/jetcron_services/agent/host/spares.py) takes the steps up
 * to the rlimits ahead of its run, then waits for the run on stdin: the uid and gid (two empty items: no switch),
 * the working directory (empty: stay), the number of environment items, the items, then the program and its
 * arguments, each ended by a NUL. It enters the directory as root (the job's user may not search the folders
 * above it), switches to the user and starts the program as above. An empty stdin (a spare ended unused): exit 0.
 *
 * The agent starts it with an empty environment and the job's on stdin, so nothing of the job's steers it while
 * it is root (a static binary has no dynamic loader, but its libc still reads GLIBC_TUNABLES at start); the job's
 * environment is only the program's. services/jetcron_services/agent/host/launch.py builds its argv;
 * jetcron_launch.py is its twin in Python, with the same command line, steps and messages, which the agent runs
 * where this is not built; docs/decisions-job-view.md has the measurements.
 *
 * Exit SETUP_FAILED, with a line on stderr naming the step and the value, when a step fails (nothing of the
 * program ran); NOT_STARTED when the program could not be started. Those numbers and the bounds below are
 * jetcron_launch.py's, given as -D flags (`python3 jetcron_launch.py --c-defines`: the Makefile and the image do).
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

#if !defined(SETUP_FAILED) || !defined(NOT_STARTED) || !defined(MAX_JOINS) || !defined(MAX_STDIN_BYTES)
#error "build with the flags `python3 jetcron_launch.py --c-defines` prints (make does)"
#endif
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define NO_ID 0xFFFFFFFFull /* (uid_t)-1: setresuid and setresgid leave such an id as it is; never a job's */
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

static void fail(const char *step, const char *value) {
    fprintf(stderr, "jetcron: could not %s %s: %s\n", step, value, strerror(errno));
    exit(SETUP_FAILED);
}

static void fail_on(const char *step, const char *value, const char *detail) {
    fprintf(stderr, "jetcron: could not %s %s %s: %s\n", step, value, detail, strerror(errno));
    exit(SETUP_FAILED);
}

static void usage(const char *option, const char *why, const char *value) {
    fprintf(stderr, "jetcron-launch: %s %s: %s\n", option, why, value);
    exit(SETUP_FAILED);
}

/* Whether text[0..length) spells a number in decimal digits alone, into *parsed. */
static int whole(const char *text, size_t length, unsigned long long *parsed) {
    char digits[32];
    if (length == 0 || length >= sizeof digits)
        return 0;
    memcpy(digits, text, length);
    digits[length] = '\0';
    char *end = NULL;
    errno = 0;
    *parsed = strtoull(digits, &end, 10);
    return errno == 0 && *end == '\0' && digits[0] >= '0' && digits[0] <= '9';
}

/* The number in text[0..length), which is part of `value` (what an error shows). */
static unsigned long long number(const char *option, const char *text, size_t length, const char *value) {
    unsigned long long parsed;
    if (!whole(text, length, &parsed))
        usage(option, "is not a whole number", value);
    return parsed;
}

struct ids {
    uid_t uid;
    gid_t gid;
    char text[96]; /* "uid UID gid GID", as errors name them */
};

static void name_ids(struct ids *ids, const char *uid, size_t uid_length, const char *gid) {
    snprintf(ids->text, sizeof ids->text, "uid %.*s gid %.32s", (int)(uid_length < 32 ? uid_length : 32), uid,
             gid);
}

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
    unsigned long long uid = number("--user", text, (size_t)(colon - text), text);
    unsigned long long gid = number("--user", colon + 1, strlen(colon + 1), text);
    if (uid >= NO_ID || gid >= NO_ID)
        usage("--user", "is out of range", text);
    struct ids ids = {(uid_t)uid, (gid_t)gid, ""};
    name_ids(&ids, text, (size_t)(colon - text), colon + 1);
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

/* No supplementary group, the real, effective and saved gid and uid, checked, no capability; then the
 * parent-death signal again (a credential change clears it), with the parent checked: one that died before it was
 * set again would never send it. */
static void switch_user(const struct ids *ids, pid_t parent, const char *program) {
    if (setgroups(0, NULL) != 0)
        fail("clear the supplementary groups for", ids->text);
    if (setresgid(ids->gid, ids->gid, ids->gid) != 0)
        fail("switch to the group of", ids->text);
    if (setresuid(ids->uid, ids->uid, ids->uid) != 0)
        fail("switch to the user", ids->text);
    uid_t ruid, euid, suid;
    gid_t rgid, egid, sgid;
    if (getresuid(&ruid, &euid, &suid) != 0 || getresgid(&rgid, &egid, &sgid) != 0 || ruid != ids->uid ||
        euid != ids->uid || suid != ids->uid || rgid != ids->gid || egid != ids->gid || sgid != ids->gid ||
        getgroups(0, NULL) != 0) {
        errno = EPERM;
        fail("switch to", ids->text);
    }
    drop_capabilities(ids->text);
    die_with_parent();
    if (getppid() != parent) {
        fprintf(stderr, "jetcron: the process that launched %s is gone\n", program);
        exit(SETUP_FAILED);
    }
}

/* The items on stdin, read to its end (an array ending in NULL, *count of them); then stdin is /dev/null. `what`:
 * what they are, for an error. */
static char **read_items(const char *what, size_t *count) {
    size_t size = 0, room = 4096;
    char *data = malloc(room);
    if (data == NULL)
        fail("read", what);
    for (;;) {
        if (size == room) {
            if (room >= MAX_STDIN_BYTES) {
                errno = E2BIG;
                fail("read", what);
            }
            room *= 2;
            char *grown = realloc(data, room);
            if (grown == NULL)
                fail("read", what);
            data = grown;
        }
        ssize_t got = read(STDIN_FILENO, data + size, room - size);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            fail("read", what);
        if (got == 0)
            break;
        size += (size_t)got;
    }
    if (size > 0 && data[size - 1] != '\0') {
        errno = EINVAL;
        fail_on("read", what, "(an item not ended by a NUL)");
    }
    *count = 0;
    for (size_t k = 0; k < size; k++)
        *count += data[k] == '\0';
    char **items = calloc(*count + 1, sizeof *items);
    if (items == NULL)
        fail("read", what);
    size_t at = 0;
    for (size_t k = 0; k < *count; k++) {
        items[k] = data + at;
        at += strlen(data + at) + 1;
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, STDIN_FILENO) < 0)
        fail("point stdin at", "/dev/null");
    close(null);
    return items;
}

/* Each of `items` is NAME=value, as exec passes it on (a name neither empty nor holding '='). */
static void check_environment(char **items, size_t count, const char *what) {
    for (size_t k = 0; k < count; k++) {
        if (items[k][0] == '=' || strchr(items[k], '=') == NULL) {
            errno = EINVAL;
            fail_on("read", what, "(an item that is not NAME=value)");
        }
    }
}

static unsigned long long option_number(const char *option, const char *text) {
    return number(option, text, strlen(text), text);
}

/* The program starts with every signal at its default and none blocked, whatever the agent was given: an ignored
 * signal stays ignored through an exec (a SIGPIPE the program never hears, a SIGHUP a nohup left). glibc keeps two
 * signals of its own (32, 33) out of reach; they pass as they are. */
static void reset_signals(void) {
    struct sigaction plain;
    memset(&plain, 0, sizeof plain);
    plain.sa_handler = SIG_DFL;
    sigemptyset(&plain.sa_mask);
    for (int signum = 1; signum < NSIG; signum++) {
        if (signum != SIGKILL && signum != SIGSTOP) {
            sigaction(signum, &plain, NULL);
        }
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

static void start(char **program, char **environment) {
    reset_signals();
    execve(program[0], program, environment);
    fprintf(stderr, "jetcron: could not start %s: %s\n", program[0], strerror(errno));
    exit(NOT_STARTED);
}

/* A spare's run, read from stdin once the steps before the switch are taken (the header comment says what). */
static void spare(pid_t parent) {
    const char *what = "the run from stdin";
    size_t count;
    char **items = read_items(what, &count);
    if (count == 0)
        exit(0);
    unsigned long long env_count = 0;
    if (count < 5 || !whole(items[3], strlen(items[3]), &env_count) || env_count > count - 5) {
        errno = EINVAL;
        fail_on("read", what, "(not a user, a directory, an environment and a program)");
    }
    char **program = &items[4 + env_count];
    char **environment = calloc((size_t)env_count + 1, sizeof *environment);
    if (environment == NULL)
        fail("read", what);
    memcpy(environment, &items[4], (size_t)env_count * sizeof *environment);
    check_environment(environment, (size_t)env_count, what);
    if (program[0][0] != '/')
        usage("the program", "is not an absolute path", program[0]);
    if (items[2][0] != '\0' && chdir(items[2]) != 0)
        fail("enter", items[2]);
    if (items[0][0] != '\0' || items[1][0] != '\0') {
        struct ids ids = {0, 0, ""};
        unsigned long long uid = NO_ID, gid = NO_ID;
        name_ids(&ids, items[0], strlen(items[0]), items[1]);
        if (!whole(items[0], strlen(items[0]), &uid) || !whole(items[1], strlen(items[1]), &gid) || uid >= NO_ID ||
            gid >= NO_ID) {
            errno = EINVAL;
            fail("switch to", ids.text);
        }
        ids.uid = (uid_t)uid, ids.gid = (gid_t)gid;
        switch_user(&ids, parent, program[0]);
    }
    start(program, environment);
}

int main(int argc, char **argv) {
    /* Every option is read and checked before the first step: a bad one changes nothing. */
    const char *joins[MAX_JOINS];
    int joined = 0;
    const char *tmp = NULL;
    struct ids user = {0, 0, ""};
    int fsize_set = 0, as_set = 0, nproc_set = 0, user_set = 0, env_stdin = 0, is_spare = 0;
    unsigned long long fsize = 0, as = 0, nproc = 0;
    int i = 1;
    if (i < argc && strcmp(argv[i], "--env-stdin") == 0)
        env_stdin = 1, i++;
    else if (i < argc && strcmp(argv[i], "--spare") == 0)
        is_spare = 1, i++;
    for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
        const char *option = argv[i];
        if (i + 1 >= argc)
            usage(option, "needs", "a value");
        const char *value = argv[i + 1];
        if (strcmp(option, "--join") == 0) {
            if (joined == MAX_JOINS)
                usage(option, "is given more than", STRINGIFY(MAX_JOINS) " times");
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
        } else if (strcmp(option, "--user") == 0 && is_spare) {
            usage(option, "is not taken with", "--spare (the run's user comes on stdin)");
        } else if (strcmp(option, "--user") == 0) {
            user = parse_user(value), user_set = 1;
        } else {
            usage("option", "is not known", option);
        }
    }
    char **program = NULL;
    if (is_spare) {
        if (i < argc)
            usage("--", "is not taken with", "--spare (the program comes on stdin)");
    } else {
        if (i + 1 >= argc)
            usage("--", "must be followed by", "the program");
        program = &argv[i + 1];
        if (program[0][0] != '/')
            usage("the program", "is not an absolute path", program[0]);
    }

    char **environment = environ;
    if (env_stdin) {
        size_t count;
        environment = read_items("the environment from stdin", &count);
        check_environment(environment, count, "the environment from stdin");
    }
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
    if (is_spare)
        spare(parent);
    if (user_set)
        switch_user(&user, parent, program[0]);
    start(program, environment);
    return NOT_STARTED;
}
