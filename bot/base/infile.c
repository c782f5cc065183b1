/*
 * infile.c - opens an input file safely (infile.h): anything but a regular file is refused
 * before a byte is read.
 *
 * The file is opened non-blocking, so opening a FIFO cannot hang waiting for a writer; fstat
 * then refuses a FIFO, directory, socket or device unread, naming what it is. Only a regular
 * file is handed over, switched back to blocking reads.
 */
#include "base/infile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int infile_open(const char *path, int *ret_fd, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        const char *kind = S_ISFIFO(st.st_mode)                           ? "a FIFO (named pipe)"
                           : S_ISDIR(st.st_mode)                          ? "a directory"
                           : S_ISSOCK(st.st_mode)                         ? "a socket"
                           : (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ? "a device"
                                                                          : "not a file";
        close(fd);
        return apbot_fail(err, errlen, APBOT_E_IO,
                          "%s: %s, not a regular file: refused unread (copy the data into a file "
                          "first)",
                          path, kind);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: %s", path, strerror(e));
    }
    *ret_fd = fd;
    return APBOT_OK;
}
