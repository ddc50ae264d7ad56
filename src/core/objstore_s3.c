/* objstore_s3.c - s3:// repositories (objstore.h): Triton's URL forms, credentials, the
 * ListObjectsV2 API (path-style, as Triton's client addresses buckets) and its XML (libxml2). */
#include "objstore_int.h"

#include "../common/alloc.h"
#include "../common/log.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>

/* "host:port" as Triton's pattern has it ([0-9a-zA-Z-.]+:[0-9]+). */
static bool host_port(const char *seg, size_t n)
{
    const char *colon = memchr(seg, ':', n);
    if (colon == NULL || colon == seg || colon + 1 == seg + n)
        return false;
    for (const char *c = seg; c < colon; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              *c == '-' || *c == '.'))
            return false;
    for (const char *c = colon + 1; c < seg + n; c++)
        if (*c < '0' || *c > '9')
            return false;
    return true;
}

static void credentials(nr_objstore_t *s)
{
    nr_buf_t text;
    nr_buf_init(&text);
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *v = NULL;
    if (nr_os_credential(s, "s3", &text, &doc, &v)) {
        s->key_id = nr_os_jv_string(nr_jv_get(v, "key_id"));
        s->secret = nr_os_jv_string(nr_jv_get(v, "secret_key"));
        s->token = nr_os_jv_string(nr_jv_get(v, "session_token"));
        s->region = nr_os_jv_string(nr_jv_get(v, "region"));
    } else {
        const char *e;
        if ((e = getenv("AWS_ACCESS_KEY_ID")) != NULL && e[0])
            s->key_id = nr_strdup(e);
        if ((e = getenv("AWS_SECRET_ACCESS_KEY")) != NULL && e[0])
            s->secret = nr_strdup(e);
        if ((e = getenv("AWS_SESSION_TOKEN")) != NULL && e[0])
            s->token = nr_strdup(e);
        if (((e = getenv("AWS_DEFAULT_REGION")) != NULL && e[0]) ||
            ((e = getenv("AWS_REGION")) != NULL && e[0]))
            s->region = nr_strdup(e);
    }
    nr_json_free(doc);
    nr_buf_free(&text);
    if (s->key_id == NULL || s->secret == NULL) { /* both or neither: anonymous requests */
        free(s->key_id);
        free(s->secret);
        s->key_id = s->secret = NULL;
    }
    if (s->token != NULL && s->token[0] == '\0') {
        free(s->token);
        s->token = NULL;
    }
    if (s->region == NULL || s->region[0] == '\0') {
        free(s->region);
        s->region = nr_strdup("us-east-1"); /* the AWS SDK's default */
    }
}

static nr_status_t *s3_init(nr_objstore_t *s, const char *rest)
{
    const char *scheme = NULL;
    if (!strncmp(rest, "https://", 8))
        scheme = "https://", rest += 8;
    else if (!strncmp(rest, "http://", 7))
        scheme = "http://", rest += 7;
    char *path = nr_os_clean_path(rest);
    const char *p = path, *slash = strchr(p, '/');
    size_t seg = slash ? (size_t)(slash - p) : strlen(p);
    credentials(s);
    if (host_port(p, seg)) { /* s3://[http(s)://]host:port/bucket/path: that server, over
                              * http unless https:// says otherwise (Triton's) */
        s->endpoint = nr_asprintf("%s%.*s", scheme ? scheme : "http://", (int)seg, p);
        p += seg + (slash != NULL);
    } else {
        s->endpoint = nr_asprintf("https://s3.%s.amazonaws.com", s->region);
    }
    nr_status_t *st = nr_os_locate(s, p);
    free(path);
    s->sigv4 = nr_asprintf("aws:amz:%s:s3", s->region);
    return st;
}

/* The query's parameters in the order SigV4 signs them (sorted by name). */
static char *s3_list_url(const nr_objstore_t *s, const char *prefix, bool delimiter,
                         const char *token)
{
    char *bucket = nr_os_escape(s->bucket, false), *pre = nr_os_escape(prefix, false);
    char *tok = token ? nr_os_escape(token, false) : NULL;
    char *url = nr_asprintf("%s/%s?%s%s%s%slist-type=2&prefix=%s", s->endpoint, bucket,
                            tok ? "continuation-token=" : "", tok ? tok : "", tok ? "&" : "",
                            delimiter ? "delimiter=%2F&" : "", pre);
    free(bucket);
    free(pre);
    free(tok);
    return url;
}

static char *s3_object_url(const nr_objstore_t *s, const char *key)
{
    char *bucket = nr_os_escape(s->bucket, false), *k = nr_os_escape(key, true);
    char *url = nr_asprintf("%s/%s/%s", s->endpoint, bucket, k);
    free(bucket);
    free(k);
    return url;
}

static xmlNode *child(const xmlNode *n, const char *name)
{
    for (xmlNode *c = n ? n->children : NULL; c != NULL; c = c->next)
        if (c->type == XML_ELEMENT_NODE && !strcmp((const char *)c->name, name))
            return c;
    return NULL;
}

/* The text of element `name` under n (a copy), or NULL. */
static char *text_of(const xmlNode *n, const char *name)
{
    xmlNode *c = child(n, name);
    if (c == NULL)
        return NULL;
    xmlChar *t = xmlNodeGetContent(c);
    char *s = nr_strdup(t ? (const char *)t : "");
    xmlFree(t);
    return s;
}

static xmlDoc *parse(const char *body, size_t len)
{
    return len > 0 && len < INT32_MAX
               ? xmlReadMemory(body, (int)len, NULL, NULL,
                               XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING)
               : NULL;
}

static nr_status_t *s3_list_parse(const nr_objstore_t *s, const char *body, size_t len,
                                  nr_os_list_t *out, char **next)
{
    *next = NULL;
    xmlDoc *doc = parse(body, len);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    if (root == NULL || strcmp((const char *)root->name, "ListBucketResult") != 0) {
        xmlFreeDoc(doc);
        return nr_status_new(NR_INTERNAL, "failed to list %s: not a ListBucketResult", s->url);
    }
    for (xmlNode *c = root->children; c != NULL; c = c->next) {
        if (c->type != XML_ELEMENT_NODE)
            continue;
        if (!strcmp((const char *)c->name, "Contents")) {
            char *key = text_of(c, "Key");
            if (key == NULL)
                continue;
            char *etag = text_of(c, "ETag");
            out->objs = nr_grow(out->objs, out->n_objs, sizeof(nr_os_obj_t));
            out->objs[out->n_objs++] = (nr_os_obj_t){key, etag ? etag : nr_strdup("")};
        } else if (!strcmp((const char *)c->name, "CommonPrefixes")) {
            char *p = text_of(c, "Prefix");
            if (p == NULL)
                continue;
            out->prefixes = nr_grow(out->prefixes, out->n_prefixes, sizeof(char *));
            out->prefixes[out->n_prefixes++] = p;
        }
    }
    char *truncated = text_of(root, "IsTruncated");
    if (truncated != NULL && !strcmp(truncated, "true"))
        *next = text_of(root, "NextContinuationToken");
    free(truncated);
    xmlFreeDoc(doc);
    return NULL;
}

/* S3's error document's code and message (the AWS SDK's exception name and message). */
static char *s3_error_text(long status, const char *body, size_t len)
{
    xmlDoc *doc = parse(body, len);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    char *code = NULL, *msg = NULL;
    if (root != NULL && !strcmp((const char *)root->name, "Error")) {
        code = text_of(root, "Code");
        msg = text_of(root, "Message");
    }
    xmlFreeDoc(doc);
    char *t = nr_asprintf("Exception: '%s' Message: '%s' (HTTP %ld)",
                          code ? code
                          : status == 404 ? "NoSuchBucket"
                          : status == 403 ? "AccessDenied"
                                          : "",
                          msg ? msg : "", status);
    free(code);
    free(msg);
    return t;
}

/* Signed with AWS Signature Version 4 by libcurl when there are credentials. */
static nr_status_t *s3_authorize(nr_objstore_t *s, CURL *c, struct curl_slist **h)
{
    if (s->key_id == NULL)
        return NULL; /* anonymous (a public bucket) */
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(c, CURLOPT_USERNAME, s->key_id);
    curl_easy_setopt(c, CURLOPT_PASSWORD, s->secret);
    /* S3 wants the payload's hash signed: an empty one, for a GET */
    *h = curl_slist_append(*h, "x-amz-content-sha256: "
                               "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    if (s->token != NULL) {
        char *t = nr_asprintf("x-amz-security-token: %s", s->token);
        *h = curl_slist_append(*h, t);
        free(t);
    }
    return NULL;
}

const nr_os_service_t nr_os_s3 = {
    .scheme = "s3://",
    .name = "S3",
    .init = s3_init,
    .list_url = s3_list_url,
    .list_parse = s3_list_parse,
    .object_url = s3_object_url,
    .error_text = s3_error_text,
    .authorize = s3_authorize,
};
