/* objstore.c - object-storage repositories mirrored into a local directory (objstore.h): the
 * URL schemes, the credential file, the HTTP requests (libcurl) and the mirror itself. What
 * differs between S3 and GCS (URLs, listings, errors) is in objstore_s3.c / objstore_gcs.c. */
#include "objstore_int.h"

#include "../common/alloc.h"
#include "../common/fs.h"
#include "../common/log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A listing page larger than this is refused (a broken or hostile server). */
#define MAX_PAGE_BYTES (64u << 20)

bool nr_objstore_is_url(const char *path)
{
    return !strncmp(path, "s3://", 5) || !strncmp(path, "gs://", 5) || !strncmp(path, "as://", 5);
}

char *nr_os_escape(const char *s, bool keep_slash)
{
    nr_buf_t b;
    nr_buf_init(&b);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/'))
            nr_buf_putc(&b, (char)c);
        else
            nr_buf_printf(&b, "%%%02X", c);
    }
    nr_buf_putc(&b, '\0');
    return nr_buf_steal(&b, NULL);
}

bool nr_os_credential(const nr_objstore_t *s, const char *section, nr_buf_t *text,
                      nr_json_doc_t **doc, const nr_jv_t **val)
{
    *doc = NULL;
    *val = NULL;
    const char *path = getenv("TRITON_CLOUD_CREDENTIAL_PATH");
    if (path == NULL || !path[0])
        return false;
    const nr_jv_t *root = NULL;
    nr_status_t *st = NULL;
    if (nr_buf_read_file(text, path, 1u << 20) != 0) {
        NR_LOG_ERROR("failed to read the cloud credential file '%s'", path);
        return false;
    }
    if ((st = nr_json_parse(text->data, text->len, doc, &root)) != NULL) {
        NR_LOG_ERROR("failed to parse the cloud credential file '%s': %s", path, st->msg);
        nr_status_free(st);
        *doc = NULL;
        return false;
    }
    const nr_jv_t *sec = nr_jv_get(root, section);
    size_t best = 0;
    for (size_t i = 0; sec != NULL && sec->type == NR_JV_OBJECT && i < sec->n; i++) {
        const nr_jv_member_t *m = &sec->u.members[i];
        if (m->key_len <= strlen(s->url) && !strncmp(s->url, m->key, m->key_len) &&
            (*val == NULL || m->key_len > best)) {
            *val = &m->val;
            best = m->key_len;
        }
    }
    return *val != NULL;
}

char *nr_os_clean_path(const char *p)
{
    while (*p == '/')
        p++;
    nr_buf_t b;
    nr_buf_init(&b);
    for (; *p; p++)
        if (*p != '/' || (b.len > 0 && b.data[b.len - 1] != '/'))
            nr_buf_putc(&b, *p);
    while (b.len > 0 && b.data[b.len - 1] == '/')
        b.len--;
    nr_buf_putc(&b, '\0');
    return nr_buf_steal(&b, NULL);
}

nr_status_t *nr_os_locate(nr_objstore_t *s, const char *path)
{
    const char *slash = strchr(path, '/');
    s->bucket = slash ? nr_strndup(path, (size_t)(slash - path)) : nr_strdup(path);
    s->base = slash ? nr_asprintf("%s/", slash + 1) : nr_strdup("");
    if (s->bucket[0] == '\0')
        return nr_status_new(NR_INTERNAL, "No bucket name found in path: %s", s->url);
    return NULL;
}

char *nr_os_jv_string(const nr_jv_t *v)
{
    return v != NULL && v->type == NR_JV_STRING ? nr_strndup(v->u.str, v->n) : NULL;
}

/* ---- HTTP ---------------------------------------------------------------------------- */

typedef struct {
    nr_buf_t *body; /* or */
    FILE *file;
    size_t got, max;
} sink_t;

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    sink_t *k = arg;
    size_t len = size * n;
    if (k->body != NULL) {
        if (k->got + len > k->max)
            return 0; /* too large: the transfer fails */
        nr_buf_append(k->body, p, len);
    } else if (fwrite(p, 1, len, k->file) != len) {
        return 0;
    }
    k->got += len;
    return len;
}

/* GET url into body (or file). *status: the HTTP status (0: no answer); a transport error is
 * returned as INTERNAL with curl's text. Lock held. */
static nr_status_t *http_get(nr_objstore_t *s, const char *url, nr_buf_t *body, FILE *file,
                             long *status)
{
    CURL *c = s->curl;
    curl_easy_reset(c);
    sink_t k = {body, file, 0, MAX_PAGE_BYTES};
    char err[CURL_ERROR_SIZE] = "";
    struct curl_slist *h = NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a server that stops sending */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &k);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    nr_status_t *st = s->svc->authorize != NULL ? s->svc->authorize(s, c, &h) : NULL;
    if (st != NULL) {
        curl_slist_free_all(h);
        *status = 0;
        return st;
    }
    if (h != NULL)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body == NULL)
        k.max = SIZE_MAX;
    CURLcode rc = curl_easy_perform(c);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(h);
    if (rc != CURLE_OK)
        return nr_status_new(NR_INTERNAL, "%s request to '%s' failed: %s", s->svc->name, url,
                             err[0] ? err : curl_easy_strerror(rc));
    return NULL;
}

/* The service's error for a request that got status (not 2xx). */
static nr_status_t *service_error(const nr_objstore_t *s, const char *what, long status,
                                  const nr_buf_t *body)
{
    char *text = s->svc->error_text(status, body->data ? body->data : "", body->len);
    nr_status_t *st = nr_status_new(NR_INTERNAL, "%s: %s", what, text);
    free(text);
    return st;
}

static void free_list(nr_os_list_t *l)
{
    for (size_t i = 0; i < l->n_objs; i++) {
        free(l->objs[i].key);
        free(l->objs[i].etag);
    }
    free(l->objs);
    for (size_t i = 0; i < l->n_prefixes; i++)
        free(l->prefixes[i]);
    free(l->prefixes);
    memset(l, 0, sizeof(*l));
}

/* Every page of the listing of prefix. Lock held. */
static nr_status_t *list_all(nr_objstore_t *s, const char *prefix, bool delimiter,
                             size_t max_pages, nr_os_list_t *out)
{
    memset(out, 0, sizeof(*out));
    char *token = NULL;
    nr_status_t *st = NULL;
    nr_buf_t body;
    nr_buf_init(&body);
    for (size_t page = 0; st == NULL && (page == 0 || token != NULL); page++) {
        if (page == max_pages)
            break;
        char *url = s->svc->list_url(s, prefix, delimiter, token);
        free(token);
        token = NULL;
        long status = 0;
        nr_buf_reset(&body);
        st = http_get(s, url, &body, NULL, &status);
        if (st == NULL && (status < 200 || status > 299)) {
            char *what = nr_asprintf("failed to list %s", s->url);
            st = service_error(s, what, status, &body);
            free(what);
        }
        free(url);
        if (st == NULL)
            st = s->svc->list_parse(s, body.data ? body.data : "", body.len, out, &token);
    }
    free(token);
    nr_buf_free(&body);
    if (st != NULL)
        free_list(out);
    return st;
}

/* ---- the store --------------------------------------------------------------------------- */

static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

nr_status_t *nr_objstore_open(const char *url, nr_objstore_t **out)
{
    static const nr_os_service_t *const services[] = {&nr_os_s3, &nr_os_gcs};
    *out = NULL;
    if (!strncmp(url, "as://", 5))
        return nr_status_new(NR_INVALID_ARG,
                             "model repository '%s': Azure Storage (as://) is not supported by "
                             "nereid yet; use s3://, gs:// or a local path",
                             url);
    const nr_os_service_t *svc = NULL;
    for (size_t i = 0; i < sizeof(services) / sizeof(services[0]) && svc == NULL; i++)
        if (!strncmp(url, services[i]->scheme, strlen(services[i]->scheme)))
            svc = services[i];
    if (svc == NULL)
        return nr_status_new(NR_INVALID_ARG, "unsupported model repository '%s'", url);
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, global_init);
    nr_objstore_t *s = nr_calloc(1, sizeof(*s));
    s->svc = svc;
    s->url = nr_strdup(url);
    pthread_mutex_init(&s->mu, NULL);
    s->curl = curl_easy_init();
    nr_status_t *st = s->curl == NULL ? nr_status_new(NR_INTERNAL, "unable to start libcurl")
                                      : svc->init(s, url + strlen(svc->scheme));
    if (st == NULL) { /* the bucket can be listed: the credentials work */
        nr_os_list_t l;
        pthread_mutex_lock(&s->mu);
        st = list_all(s, s->base, true, 1, &l);
        pthread_mutex_unlock(&s->mu);
        if (st == NULL) {
            free_list(&l);
        } else { /* Triton's words for a client it cannot make */
            nr_status_t *w = nr_status_new(NR_INTERNAL,
                                           "Unable to create %s filesystem client. Check "
                                           "account credentials. %s",
                                           svc->name, st->msg);
            nr_status_free(st);
            st = w;
        }
    }
    if (st == NULL && (s->dir = nr_make_tmpdir("nereid-repo-")) == NULL)
        st = nr_status_new(NR_INTERNAL, "failed to make a local directory for '%s': %s", url,
                           strerror(errno));
    if (st != NULL) {
        nr_objstore_close(s);
        return st;
    }
    NR_LOG_INFO("model repository '%s' mirrored in %s", url, s->dir);
    *out = s;
    return NULL;
}

void nr_objstore_close(nr_objstore_t *s)
{
    if (s == NULL)
        return;
    if (s->dir != NULL)
        nr_remove_tree(s->dir);
    if (s->curl != NULL)
        curl_easy_cleanup(s->curl);
    pthread_mutex_destroy(&s->mu);
    nr_strmap_free(&s->etag_of);
    for (size_t i = 0; i < s->n_files; i++) {
        free(s->rel[i]);
        free(s->etag[i]);
    }
    free(s->rel);
    free(s->etag);
    free(s->url);
    free(s->endpoint);
    free(s->bucket);
    free(s->base);
    free(s->dir);
    free(s->key_id);
    free(s->secret);
    free(s->token);
    free(s->region);
    free(s->sigv4);
    free(s->gcs_cred);
    free(s->bearer);
    free(s);
}

const char *nr_objstore_dir(const nr_objstore_t *s)
{
    return s->dir;
}

/* A name the local directory can hold: no empty, "." or ".." component, no NUL (an object
 * key naming a file outside the directory is skipped, with a warning). */
static bool safe_rel(const char *rel)
{
    if (rel[0] == '\0' || rel[0] == '/')
        return false;
    for (const char *p = rel; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        p += n + (e != NULL);
        if (e != NULL && *p == '\0')
            return false; /* a trailing '/': a "directory" marker, not a file */
    }
    return true;
}

nr_status_t *nr_objstore_models(nr_objstore_t *s, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    nr_os_list_t l;
    pthread_mutex_lock(&s->mu);
    nr_status_t *st = list_all(s, s->base, true, SIZE_MAX, &l);
    pthread_mutex_unlock(&s->mu);
    if (st != NULL)
        return st;
    size_t bl = strlen(s->base);
    for (size_t i = 0; i < l.n_prefixes; i++) {
        const char *p = l.prefixes[i];
        if (strncmp(p, s->base, bl) != 0)
            continue;
        char *name = nr_strdup(p + bl);
        size_t len = strlen(name);
        if (len > 0 && name[len - 1] == '/')
            name[--len] = '\0';
        if (len == 0 || strchr(name, '/') != NULL || !safe_rel(name)) {
            free(name);
            continue;
        }
        *names = nr_grow(*names, *n, sizeof(char *));
        (*names)[(*n)++] = name;
    }
    free_list(&l);
    return NULL;
}

/* Makes the directories of path (relative to the store's directory) up to its last '/'. */
static bool make_parents(const nr_objstore_t *s, const char *rel)
{
    char *p = nr_asprintf("%s/%s", s->dir, rel);
    bool ok = true;
    for (char *q = p + strlen(s->dir) + 1; ok && (q = strchr(q, '/')) != NULL; q++) {
        *q = '\0';
        ok = mkdir(p, 0755) == 0 || errno == EEXIST;
        *q = '/';
    }
    free(p);
    return ok;
}

/* Downloads object key into <dir>/<rel> (through a temporary file, renamed when whole). */
static nr_status_t *download(nr_objstore_t *s, const char *key, const char *rel)
{
    if (!make_parents(s, rel))
        return nr_status_new(NR_INTERNAL, "failed to make the directories of %s/%s: %s", s->dir,
                             rel, strerror(errno));
    char *path = nr_asprintf("%s/%s", s->dir, rel);
    char *tmp = nr_asprintf("%s/.nereid-download-XXXXXX", s->dir);
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    nr_status_t *st = NULL;
    if (f == NULL) {
        st = nr_status_new(NR_INTERNAL, "failed to write %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
    } else {
        char *url = s->svc->object_url(s, key);
        long status = 0;
        st = http_get(s, url, NULL, f, &status);
        bool closed = fclose(f) == 0;
        if (st == NULL && (status < 200 || status > 299)) {
            nr_buf_t body;
            nr_buf_init(&body);
            nr_buf_read_file(&body, tmp, 1u << 16); /* the error document */
            char *what = nr_asprintf("failed to download '%s'", key);
            st = service_error(s, what, status, &body);
            free(what);
            nr_buf_free(&body);
        } else if (st == NULL && (!closed || rename(tmp, path) != 0)) {
            st = nr_status_new(NR_INTERNAL, "failed to write %s: %s", path, strerror(errno));
        }
        free(url);
    }
    if (st != NULL)
        unlink(tmp);
    free(tmp);
    free(path);
    return st;
}

/* The etag the local file rel was downloaded from (NULL: none). */
static const char *etag_of(const nr_objstore_t *s, const char *rel)
{
    uint32_t i;
    return nr_strmap_get(&s->etag_of, rel, strlen(rel), &i) ? s->etag[i] : NULL;
}

static void set_etag(nr_objstore_t *s, const char *rel, const char *etag)
{
    uint32_t i;
    if (!nr_strmap_get(&s->etag_of, rel, strlen(rel), &i)) {
        s->rel = nr_grow(s->rel, s->n_files, sizeof(char *));
        s->etag = nr_grow(s->etag, s->n_files, sizeof(char *));
        i = (uint32_t)s->n_files++;
        s->rel[i] = nr_strdup(rel);
        s->etag[i] = NULL;
        /* (the map borrows s->rel[i], which stays until close) */
        nr_strmap_put(&s->etag_of, s->rel[i], strlen(s->rel[i]), i, NULL);
    }
    free(s->etag[i]);
    s->etag[i] = etag ? nr_strdup(etag) : NULL;
}

typedef struct {
    nr_objstore_t *s;
    nr_strmap_t *listed; /* rel paths the bucket has */
    size_t dir_len;
} prune_t;

/* Deletes the files under path (absolute) that the listing does not have; removes the
 * directories left empty. Returns whether path itself was removed. */
static bool prune(prune_t *p, const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    size_t left = 0;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *sub = nr_asprintf("%s/%s", path, de->d_name);
        const char *rel = sub + p->dir_len + 1;
        struct stat sb;
        uint32_t v;
        if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            left += !prune(p, sub);
        } else if (!nr_strmap_get(p->listed, rel, strlen(rel), &v)) {
            unlink(sub);
            set_etag(p->s, rel, NULL);
        } else {
            left++;
        }
        free(sub);
    }
    if (d != NULL)
        closedir(d);
    return left == 0 && rmdir(path) == 0;
}

nr_status_t *nr_objstore_sync(nr_objstore_t *s, const char *model)
{
    if (!safe_rel(model) || strchr(model, '/') != NULL)
        return nr_status_new(NR_INVALID_ARG, "invalid model name '%s'", model);
    char *prefix = nr_asprintf("%s%s/", s->base, model);
    size_t bl = strlen(s->base);
    nr_os_list_t l;
    pthread_mutex_lock(&s->mu);
    nr_status_t *st = list_all(s, prefix, false, SIZE_MAX, &l);
    nr_strmap_t listed = {0};
    size_t fetched = 0;
    for (size_t i = 0; st == NULL && i < l.n_objs; i++) {
        const char *key = l.objs[i].key;
        if (strncmp(key, prefix, strlen(prefix)) != 0)
            continue;
        const char *rel = key + bl;
        if (!safe_rel(rel)) {
            if (key[strlen(key) - 1] != '/')
                NR_LOG_WARN("object '%s' of %s names no file in a model directory: skipped",
                               key, s->url);
            continue;
        }
        nr_strmap_put(&listed, rel, strlen(rel), 0, NULL);
        char *local = nr_asprintf("%s/%s", s->dir, rel);
        const char *had = etag_of(s, rel);
        bool fresh = had != NULL && !strcmp(had, l.objs[i].etag) && access(local, F_OK) == 0;
        free(local);
        if (fresh)
            continue;
        st = download(s, key, rel);
        if (st == NULL) {
            set_etag(s, rel, l.objs[i].etag);
            fetched++;
        }
    }
    if (st == NULL) { /* what the bucket no longer has goes */
        char *mdir = nr_asprintf("%s/%s", s->dir, model);
        prune_t p = {s, &listed, strlen(s->dir)};
        prune(&p, mdir);
        free(mdir);
    }
    pthread_mutex_unlock(&s->mu);
    if (st == NULL && fetched > 0)
        NR_LOG_INFO("%s: %zu file%s of '%s' downloaded", s->url, fetched, fetched == 1 ? "" : "s",
                    model);
    nr_strmap_free(&listed);
    free_list(&l);
    free(prefix);
    return st;
}
