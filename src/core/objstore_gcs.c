/* objstore_gcs.c - gs:// repositories (objstore.h): the Cloud Storage JSON API's listing
 * (objects.list, with a delimiter for the model directories) and media downloads. Requests are
 * anonymous: the emulator (CLOUD_STORAGE_EMULATOR_ENDPOINT, as Google's clients read it, or
 * STORAGE_EMULATOR_HOST) and public buckets; service-account credentials are not read yet. */
#include "objstore_int.h"

#include "../common/alloc.h"
#include "../common/log.h"

#include <stdlib.h>
#include <string.h>

static nr_status_t *gcs_init(nr_objstore_t *s, const char *rest)
{
    while (*rest == '/')
        rest++;
    const char *slash = strchr(rest, '/');
    s->bucket = slash ? nr_strndup(rest, (size_t)(slash - rest)) : nr_strdup(rest);
    const char *path = slash ? slash + 1 : "";
    nr_buf_t b;
    nr_buf_init(&b);
    for (const char *p = path; *p; p++) /* no leading, doubled or trailing '/' */
        if (*p != '/' || (b.len > 0 && b.data[b.len - 1] != '/'))
            nr_buf_putc(&b, *p);
    while (b.len > 0 && b.data[b.len - 1] == '/')
        b.len--;
    if (b.len > 0)
        nr_buf_putc(&b, '/');
    nr_buf_putc(&b, '\0');
    s->base = nr_buf_steal(&b, NULL);
    if (s->bucket[0] == '\0')
        return nr_status_new(NR_INTERNAL, "No bucket name found in path: %s", s->url);
    const char *emu = getenv("CLOUD_STORAGE_EMULATOR_ENDPOINT");
    if (emu == NULL || !emu[0])
        emu = getenv("STORAGE_EMULATOR_HOST");
    if (emu != NULL && emu[0]) {
        s->endpoint = strstr(emu, "://") ? nr_strdup(emu) : nr_asprintf("http://%s", emu);
        size_t n = strlen(s->endpoint);
        while (n > 0 && s->endpoint[n - 1] == '/')
            s->endpoint[--n] = '\0';
    } else {
        s->endpoint = nr_strdup("https://storage.googleapis.com");
        const char *cred = getenv("GOOGLE_APPLICATION_CREDENTIALS");
        nr_buf_t text;
        nr_buf_init(&text);
        nr_json_doc_t *doc = NULL;
        const nr_jv_t *v = NULL;
        if ((cred != NULL && cred[0]) || nr_os_credential(s, "gs", &text, &doc, &v))
            NR_LOG_WARN("%s: nereid does not read Google credentials yet; its requests to "
                           "Cloud Storage are anonymous (a public bucket, or an emulator)",
                           s->url);
        nr_json_free(doc);
        nr_buf_free(&text);
    }
    return NULL;
}

static char *gcs_list_url(const nr_objstore_t *s, const char *prefix, bool delimiter,
                          const char *token)
{
    char *bucket = nr_os_escape(s->bucket, false), *pre = nr_os_escape(prefix, false);
    char *tok = token ? nr_os_escape(token, false) : NULL;
    char *url = nr_asprintf("%s/storage/v1/b/%s/o?prefix=%s%s%s%s", s->endpoint, bucket, pre,
                            delimiter ? "&delimiter=%2F" : "", tok ? "&pageToken=" : "",
                            tok ? tok : "");
    free(bucket);
    free(pre);
    free(tok);
    return url;
}

static char *gcs_object_url(const nr_objstore_t *s, const char *key)
{
    char *bucket = nr_os_escape(s->bucket, false), *k = nr_os_escape(key, false);
    char *url = nr_asprintf("%s/storage/v1/b/%s/o/%s?alt=media", s->endpoint, bucket, k);
    free(bucket);
    free(k);
    return url;
}

/* A string member, or a number's text (the API writes int64 as strings; be lenient). */
static char *member(const nr_jv_t *obj, const char *key)
{
    const nr_jv_t *v = nr_jv_get(obj, key);
    if (v == NULL)
        return NULL;
    if (v->type == NR_JV_INT)
        return nr_asprintf("%lld", (long long)v->u.i);
    return nr_os_jv_string(v);
}

static nr_status_t *gcs_list_parse(const nr_objstore_t *s, const char *body, size_t len,
                                   nr_os_list_t *out, char **next)
{
    *next = NULL;
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root = NULL;
    nr_status_t *st = nr_json_parse(body, len, &doc, &root);
    if (st != NULL || root->type != NR_JV_OBJECT) {
        nr_status_free(st);
        nr_json_free(doc);
        return nr_status_new(NR_INTERNAL, "failed to list %s: not an objects listing", s->url);
    }
    const nr_jv_t *items = nr_jv_get(root, "items");
    for (size_t i = 0; items != NULL && items->type == NR_JV_ARRAY && i < items->n; i++) {
        const nr_jv_t *it = &items->u.items[i];
        char *name = member(it, "name");
        if (name == NULL)
            continue;
        /* the generation changes with every new content; md5 alone would miss a rewrite of
         * the same bytes, which is no change anyway */
        char *gen = member(it, "generation");
        if (gen == NULL)
            gen = member(it, "md5Hash");
        out->objs = nr_grow(out->objs, out->n_objs, sizeof(nr_os_obj_t));
        out->objs[out->n_objs++] = (nr_os_obj_t){name, gen ? gen : nr_strdup("")};
    }
    const nr_jv_t *pre = nr_jv_get(root, "prefixes");
    for (size_t i = 0; pre != NULL && pre->type == NR_JV_ARRAY && i < pre->n; i++) {
        char *p = nr_os_jv_string(&pre->u.items[i]);
        if (p == NULL)
            continue;
        out->prefixes = nr_grow(out->prefixes, out->n_prefixes, sizeof(char *));
        out->prefixes[out->n_prefixes++] = p;
    }
    *next = member(root, "nextPageToken");
    if (*next != NULL && (*next)[0] == '\0') {
        free(*next);
        *next = NULL;
    }
    nr_json_free(doc);
    return NULL;
}

/* The JSON API's error: {"error": {"code": N, "message": "..."}}. */
static char *gcs_error_text(long status, const char *body, size_t len)
{
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root = NULL;
    char *msg = NULL;
    nr_status_t *st = nr_json_parse(body, len, &doc, &root);
    if (st == NULL)
        msg = nr_os_jv_string(nr_jv_get(nr_jv_get(root, "error"), "message"));
    nr_status_free(st);
    nr_json_free(doc);
    if (msg == NULL && len > 0 && len < 512 && memchr(body, '\0', len) == NULL)
        msg = nr_strndup(body, len); /* the emulator answers some errors in plain text */
    char *t = nr_asprintf("HTTP %ld%s%s", status, msg ? ": " : "", msg ? msg : "");
    free(msg);
    return t;
}

const nr_os_service_t nr_os_gcs = {
    .scheme = "gs://",
    .name = "GCS",
    .init = gcs_init,
    .list_url = gcs_list_url,
    .list_parse = gcs_list_parse,
    .object_url = gcs_object_url,
    .error_text = gcs_error_text,
};
