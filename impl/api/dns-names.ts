/**
 * Kubernetes object names (RFC 1123, as the API validates them): a DNS label for namespaces,
 * a DNS subdomain for most other objects (pods, service accounts) and for trust domains.
 */

/** At most 63 of [a-z0-9-], starting and ending alphanumeric. */
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** At most 253 characters of dot-separated labels. */
export const DNS1123_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
