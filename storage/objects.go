package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"

	cos "github.com/tencentyun/cos-go-sdk-v5"

	"github.com/aidlc/dlc/errs"
)

// PutObject writes data as object obj in one PUT (COS takes up to 5 GB
// so), with contentType, and the SDK's CRC-64 check of what COS stored.
// It retries throttling and server errors with backoff, as every call of
// the client does. It is for what the platform keeps in COS itself, such
// as a run's whole log; packages go up with UploadPackage.
func (c *COSClient) PutObject(ctx context.Context, obj COSObject, data []byte, contentType string) error {
	obj, err := c.object(obj)
	if err != nil {
		return err
	}
	if obj.Key == "" {
		return fmt.Errorf("storage: COS object %s has no key", obj.URI())
	}
	cl := c.sdk(obj)
	_, err = c.do(ctx, func(ctx context.Context) (*cos.Response, error) {
		return cl.Object.Put(ctx, obj.Key, bytes.NewReader(data), &cos.ObjectPutOptions{
			ObjectPutHeaderOptions: &cos.ObjectPutHeaderOptions{ContentType: contentType, ContentLength: int64(len(data))},
		})
	})
	return cosError("PUT", obj, err)
}

// GetObject reads object obj whole, at most max bytes of it: a larger
// object (COS's Content-Length, or what it sends past it) is refused with
// an error that is errors.Is ErrInvalid, and nothing past max+1 bytes is
// read. A missing object is errors.Is ErrNotFound.
func (c *COSClient) GetObject(ctx context.Context, obj COSObject, max int64) ([]byte, error) {
	obj, err := c.object(obj)
	if err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, fmt.Errorf("storage: GetObject of %s needs a limit above 0, not %d: %w", obj.URI(), max, errs.ErrInvalid)
	}
	cl := c.sdk(obj)
	var data []byte
	_, err = c.do(ctx, func(ctx context.Context) (*cos.Response, error) {
		resp, err := cl.Object.Get(ctx, obj.Key, nil)
		if err != nil {
			return resp, err
		}
		defer resp.Body.Close()
		// Too large is no answer to retry: said without the response.
		if resp.ContentLength > max {
			return nil, tooLarge(obj, resp.ContentLength, max)
		}
		data, err = io.ReadAll(io.LimitReader(resp.Body, max+1))
		if err == nil && int64(len(data)) > max {
			return nil, tooLarge(obj, int64(len(data)), max)
		}
		return resp, err
	})
	if err != nil {
		return nil, cosError("GET", obj, err)
	}
	return data, nil
}

func tooLarge(obj COSObject, size, max int64) error {
	return fmt.Errorf("COS object %s is %d bytes or more, over the %d read: %w", obj.URI(), size, max, errs.ErrInvalid)
}
