/* fs.h - file-system helpers shared by the layers above. */
#ifndef NR_FS_H
#define NR_FS_H

/* Removes path and, when it is a directory, everything under it. A symbolic link is removed
 * itself, never followed (what it points to stays). Errors are ignored: what could not be
 * removed stays. */
void nr_remove_tree(const char *path);

#endif
