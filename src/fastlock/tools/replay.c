/* The same-bytes floor: replay a recorded lifecycle (fastlock.tools.floor) from C.
   replay <unix path | host:port> <recording> <db>: connects, SELECT db, FLUSHDB, sends the
   untimed prefix, then times the recorded writes: each is sent with one send() and its
   replies (one per command) are read before the next; prints the timed nanoseconds. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static char *in;
static size_t in_cap = 1 << 20, in_len, in_pos;
static int fd;

static void die(const char *what) { perror(what); exit(1); }

/* End of the reply starting at p, or 0 when it is not complete yet. */
static const char *skip(const char *p, const char *end) {
    const char *eol;
    long n;
    if (p >= end) return 0;
    eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) return 0;
    n = strtol(p + 1, 0, 10);
    switch (*p) {
    case '$': case '!': case '=':
        if (n < 0) return eol + 1;
        return (end - (eol + 1) >= n + 2) ? eol + 1 + n + 2 : 0;
    case '*': case '~': case '>': case '%': case '|':
        if (n < 0) return eol + 1;
        if (*p == '%' || *p == '|') n *= 2;
        p = eol + 1;
        while (n-- > 0) if (!(p = skip(p, end))) return 0;
        return p;
    default:
        return eol + 1;
    }
}

static void roundtrip(const char *data, uint32_t len, uint32_t replies) {
    size_t sent = 0;
    while (sent < len) {
        ssize_t n = send(fd, data + sent, len - sent, MSG_NOSIGNAL);
        if (n <= 0) die("send");
        sent += (size_t)n;
    }
    while (replies) {
        const char *next;
        while (replies && (next = skip(in + in_pos, in + in_len))) {
            if (in[in_pos] == '-' && getenv("FASTLOCK_REPLAY_STRICT")) {
                fprintf(stderr, "error reply: %.*s", (int)(next - in - in_pos), in + in_pos);
                exit(2);
            }
            in_pos = (size_t)(next - in);
            replies--;
        }
        if (!replies) break;
        if (in_pos == in_len) in_pos = in_len = 0;
        if (in_len == in_cap) {
            in_cap *= 2;
            if (!(in = realloc(in, in_cap))) die("realloc");
        }
        ssize_t n = recv(fd, in + in_len, in_cap - in_len, 0);
        if (n <= 0) die("recv");
        in_len += (size_t)n;
    }
    if (in_pos == in_len) in_pos = in_len = 0;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: replay <path|host:port> <recording> <db>\n"); return 1; }
    const char *colon = strrchr(argv[1], ':');
    if (argv[1][0] == '/' || !colon) {
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        strncpy(addr.sun_path, argv[1], sizeof addr.sun_path - 1);
        if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0 || connect(fd, (void *)&addr, sizeof addr)) die("connect");
    } else {
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
        char host[256] = {0};
        int one = 1;
        memcpy(host, argv[1], (size_t)(colon - argv[1]) < 255 ? (size_t)(colon - argv[1]) : 255);
        inet_pton(AF_INET, host, &addr.sin_addr);
        if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 || connect(fd, (void *)&addr, sizeof addr)) die("connect");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) die("recording");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *rec = malloc((size_t)size);
    if (!rec || fread(rec, 1, (size_t)size, f) != (size_t)size) die("read");
    fclose(f);
    in = malloc(in_cap);
    char select[64];
    int slen = snprintf(select, sizeof select, "*2\r\n$6\r\nSELECT\r\n$%zu\r\n%s\r\n*1\r\n$7\r\nFLUSHDB\r\n",
                        strlen(argv[3]), argv[3]);
    roundtrip(select, (uint32_t)slen, 2);
    uint32_t prefix, header[2];
    memcpy(&prefix, rec, 4);
    const char *p = rec + 4, *end = rec + size;
    struct timespec t0 = {0}, t1;
    for (uint32_t i = 0; p < end; i++) {
        if (i == prefix) clock_gettime(CLOCK_MONOTONIC, &t0);
        memcpy(header, p, 8);
        roundtrip(p + 8, header[1], header[0]);
        p += 8 + header[1];
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%lld\n", (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
    return 0;
}
