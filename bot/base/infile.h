/*
 * infile.h - opening an input file safely: a regular file only, refused unread otherwise.
 *
 * What every reader of a user's file uses (the invoice readers, the vendor map): a FIFO,
 * socket, device or directory is refused without blocking and without reading a byte from it,
 * so a pipe's data stays in the pipe. The readers take the descriptor; the size bounds are
 * each reader's own.
 */
#ifndef APBOT_BASE_INFILE_H
#define APBOT_BASE_INFILE_H

#include <stddef.h>

#include "apbot/error.h"

/*
 * Opens path for reading, refusing anything but a regular file: a FIFO, socket, device or
 * directory is refused without blocking and without reading a byte from it (a pipe's data stays
 * in the pipe). On success *ret_fd is an open descriptor (O_CLOEXEC, blocking) the caller closes.
 * Returns APBOT_E_IO (cannot open; not a regular file) with "path: reason" in err.
 */
int infile_open(const char *path, int *ret_fd, char *err, size_t errlen) APBOT_MUST_USE;

#endif
